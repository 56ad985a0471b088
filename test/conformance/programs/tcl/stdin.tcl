fconfigure stdin -translation binary
fconfigure stdout -translation binary
puts -nonewline [read stdin]
