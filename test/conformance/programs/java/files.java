import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

public class Main {
    public static void main(String[] args) throws Exception {
        String s = Files.readString(Path.of("input.txt"), StandardCharsets.UTF_8);
        Files.writeString(Path.of("output.txt"), s.toUpperCase(), StandardCharsets.UTF_8);
    }
}
