# A huge recursion limit, and recursion through C code (map calls back into
# Python) so every level eats real C stack: the interpreter overflows its
# stack and dies of SIGSEGV.
import sys
sys.setrecursionlimit(1 << 30)
print("recursing", flush=True)

def down(n):
    return list(map(down, [n + 1]))

down(0)
