with open("input.txt", encoding="utf-8") as f:
    s = f.read()
with open("output.txt", "w", encoding="utf-8") as f:
    f.write(s.upper())
