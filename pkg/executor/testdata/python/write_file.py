import os

os.makedirs("out", exist_ok=True)
with open("out/result.txt", "w", encoding="utf-8") as f:
    f.write("result: ok")
print("written")
