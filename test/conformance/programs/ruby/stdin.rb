$stdout.binmode; $stdout.write($stdin.binmode.read)
