BEGIN { while (1) i++ }
