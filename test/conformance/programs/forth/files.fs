create buf 65536 allot
variable len
: upcase-buf  len @ 0 ?do buf i + c@ toupper buf i + c! loop ;
s" input.txt" r/o open-file throw
dup buf 65536 rot read-file throw len ! close-file throw
upcase-buf
s" output.txt" w/o create-file throw
dup buf len @ rot write-file throw close-file throw
bye
