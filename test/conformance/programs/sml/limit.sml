fun loop (n : IntInf.int) = loop (n + 1);
val _ = loop 0;
