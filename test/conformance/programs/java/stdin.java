public class Main {
    public static void main(String[] args) throws Exception {
        System.out.write(System.in.readAllBytes());
        System.out.flush();
    }
}
