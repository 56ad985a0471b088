exit(3);
