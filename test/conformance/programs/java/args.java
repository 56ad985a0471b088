public class Main {
    public static void main(String[] args) {
        for (String a : args) System.out.println(a);
    }
}
