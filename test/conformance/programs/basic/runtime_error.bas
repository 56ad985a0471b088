dim a(3)
print a(10)
