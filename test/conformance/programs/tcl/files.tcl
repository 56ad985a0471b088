set f [open input.txt r]
set s [read $f]
close $f
set o [open output.txt w]
puts -nonewline $o [string toupper $s]
close $o
