using System;
class Program { static void Main() { int x = "not an int"; Console.WriteLine(x) } }
