3 (bye)
