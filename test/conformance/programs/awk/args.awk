BEGIN { for (i = 1; i < ARGC; i++) print ARGV[i] }
