// A detached, unref'd child in its own session with stdio ignored: the
// main program exits 0 at once.
const { spawn } = require('child_process');
const c = spawn('/bin/sh', ['-c', 'trap "" HUP TERM; while :; do sleep 1; done'], { detached: true, stdio: 'ignore' });
c.unref();
console.log('daemon', c.pid > 0 ? 'started' : 'failed');
