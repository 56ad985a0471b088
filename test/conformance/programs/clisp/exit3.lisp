(ext:exit 3)
