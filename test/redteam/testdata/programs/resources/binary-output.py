# Raw bytes through sys.stdout.buffer: a truncated UTF-8 sequence, then
# bytes 0x80-0xff.
import sys
sys.stdout.buffer.write(b"ok \xe2\x82" + bytes(range(0x80, 0x100)))
sys.stdout.buffer.flush()
