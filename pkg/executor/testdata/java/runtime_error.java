public class Main {
    public static void main(String[] args) {
        int divisor = args.length;
        System.out.println(1 / divisor);
    }
}
