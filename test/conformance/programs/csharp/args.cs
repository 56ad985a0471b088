using System;
class Program { static void Main(string[] args) { foreach (var a in args) Console.Write(a + "\n"); } }
