s = fileread("input.txt");
f = fopen("output.txt", "w");
fwrite(f, upper(s));
fclose(f);
