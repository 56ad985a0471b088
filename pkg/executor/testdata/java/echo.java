public class Main {
    public static void main(String[] args) throws Exception {
        System.in.transferTo(System.out);
        System.out.flush();
    }
}
