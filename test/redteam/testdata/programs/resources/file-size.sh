# head writes 5 MB into one file; the file-size limit kills it (SIGXFSZ).
head -c 5000000 /dev/zero > /work/big
