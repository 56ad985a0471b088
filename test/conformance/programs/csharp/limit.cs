using System;
class Program {
    static void Main() {
        long n = 0;
        while (true) { n++; if (n == long.MaxValue) Console.WriteLine(n); }
    }
}
