// Four worker threads and the main thread spinning.
const { Worker } = require('worker_threads');
for (let i = 0; i < 4; i++) {
  new Worker('let x = 0; for (;;) { x = (x * 31 + 7) | 0; }', { eval: true });
}
console.log('burning');
let x = 0;
for (;;) { x = (x * 31 + 7) | 0; }
