foreach a $argv {
    puts $a
}
