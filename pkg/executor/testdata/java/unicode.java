public class Main {
    public static void main(String[] args) {
        System.out.println("héllo wörld ✓ 日本語 🚀");
    }
}
