x <- readChar("input.txt", file.info("input.txt")$size, useBytes = TRUE)
writeChar(toupper(x), "output.txt", eos = NULL)
