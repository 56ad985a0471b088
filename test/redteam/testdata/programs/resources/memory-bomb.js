// Buffer.alloc (zero-filled, so every page is touched) 4 MiB at a time,
// kept alive forever: off-heap memory V8's heap limit does not see.
const hog = [];
for (;;) {
  hog.push(Buffer.alloc(4 << 20, 0x5a));
}
