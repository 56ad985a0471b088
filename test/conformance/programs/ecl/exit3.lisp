(ext:quit 3)
