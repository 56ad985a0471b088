quit(3)
