create buf 65536 allot
: copy  begin buf 65536 stdin read-file throw dup while buf swap type repeat drop ;
copy bye
