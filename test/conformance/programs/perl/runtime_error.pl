die "boom\n";
