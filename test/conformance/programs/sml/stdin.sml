fun copy () =
  case TextIO.input TextIO.stdIn of
    "" => ()
  | s => (TextIO.output (TextIO.stdOut, s); copy ());
val _ = copy ();
