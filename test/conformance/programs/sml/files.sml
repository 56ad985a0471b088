val ins = TextIO.openIn "input.txt";
val s = TextIO.inputAll ins;
val _ = TextIO.closeIn ins;
val out = TextIO.openOut "output.txt";
val _ = TextIO.output (out, String.map Char.toUpper s);
val _ = TextIO.closeOut out;
