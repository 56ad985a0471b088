long n = 0
while (true) { n++; if (n == Long.MAX_VALUE) println(n) }
