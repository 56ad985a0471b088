public class Main {
    static volatile long x;

    public static void main(String[] args) {
        while (true) x++;
    }
}
