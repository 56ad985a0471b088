con <- file("stdin", "rb")
repeat {
  b <- readBin(con, "raw", 65536)
  if (length(b) == 0) break
  cat(rawToChar(b))
}
