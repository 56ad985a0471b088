s = fread(stdin, Inf, "uint8=>char")';
fwrite(stdout, s);
