using System;
using System.IO;
using System.Text;
class Program {
    static void Main() {
        string s = File.ReadAllText("input.txt", Encoding.UTF8);
        File.WriteAllText("output.txt", s.ToUpperInvariant(), new UTF8Encoding(false));
    }
}
