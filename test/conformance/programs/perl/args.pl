print "$_\n" for @ARGV;
