// Flood stderr from node synchronously (process.stderr on a pipe is
// synchronous on Linux), forever.
const fs = require('fs');
const chunk = Buffer.alloc(1 << 16, 'J'.charCodeAt(0));
for (;;) {
  try { fs.writeSync(2, chunk); } catch (e) { /* EAGAIN, EPIPE: keep going */ }
}
