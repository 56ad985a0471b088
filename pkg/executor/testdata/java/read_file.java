import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

public class Main {
    public static void main(String[] args) throws Exception {
        String s = Files.readString(Path.of("data/input.txt"), StandardCharsets.UTF_8);
        System.out.println(s);
    }
}
