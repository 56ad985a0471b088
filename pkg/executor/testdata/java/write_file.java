import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

public class Main {
    public static void main(String[] args) throws Exception {
        Files.createDirectories(Path.of("out"));
        Files.writeString(Path.of("out/result.txt"), "result: ok", StandardCharsets.UTF_8);
        System.out.println("written");
    }
}
