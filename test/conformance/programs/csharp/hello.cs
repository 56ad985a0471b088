using System;
class Program { static void Main() { Console.Write("Hello, World!\n"); } }
