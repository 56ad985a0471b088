using System;
using System.IO;
class Program {
    static void Main() {
        var stdin = Console.OpenStandardInput();
        var stdout = Console.OpenStandardOutput();
        stdin.CopyTo(stdout);
        stdout.Flush();
    }
}
