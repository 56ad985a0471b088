using System;
using System.Text;
class Program {
    static void Main() {
        Console.OutputEncoding = new UTF8Encoding(false);
        Console.Write("héllo wörld ✓ 日本\n");
    }
}
