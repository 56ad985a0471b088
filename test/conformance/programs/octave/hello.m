printf("Hello, World!\n");
