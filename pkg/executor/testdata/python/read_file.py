with open("data/input.txt", encoding="utf-8") as f:
    print(f.read())
