using System;
class Program { static void Main() { object o = null; Console.WriteLine(o.ToString()); } }
