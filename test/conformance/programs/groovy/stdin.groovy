def buf = new byte[4096]
int n
while ((n = System.in.read(buf)) >= 0) System.out.write(buf, 0, n)
System.out.flush()
