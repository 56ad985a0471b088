import sys
sys.stdout.buffer.write(sys.stdin.buffer.read())
