# Unbounded recursion under CPython's default recursion limit: RecursionError.
import sys

def down(n):
    return down(n + 1) + 1

try:
    down(0)
except RecursionError as e:
    print("RecursionError caught:", e, flush=True)
    raise
