: args  begin next-arg dup while type cr repeat 2drop ;
args bye
