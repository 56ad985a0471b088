val _ = app (fn a => print (a ^ "\n")) (CommandLine.arguments ());
