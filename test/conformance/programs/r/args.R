for (a in commandArgs(trailingOnly = TRUE)) cat(a, "\n", sep = "")
