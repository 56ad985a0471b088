val _ = Posix.Process.exit (Word8.fromInt 3);
