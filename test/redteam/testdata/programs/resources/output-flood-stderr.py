# Write to stderr forever, one line at a time.
import sys
line = "E" * 99 + "\n"
while True:
    try:
        sys.stderr.write(line)
    except OSError:
        pass
