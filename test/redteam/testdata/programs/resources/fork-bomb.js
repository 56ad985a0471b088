// Every node process spawns copies of itself forever (child_process): the
// pids limit must stop it and the run must end the whole tree.
const { spawn } = require('child_process');
const isChild = process.env.BOMB_CHILD === '1';
let refused = 0;
function bomb() {
  try {
    const c = spawn(process.execPath, [__filename], { env: { BOMB_CHILD: '1' }, stdio: 'ignore' });
    c.on('error', () => { refused++; });
  } catch (e) {
    refused++;
  }
}
const timer = setInterval(() => { for (let i = 0; i < 4; i++) bomb(); }, 5);
if (!isChild) {
  setTimeout(() => {
    clearInterval(timer);
    console.log('refused', refused > 0);
    process.exit(0);
  }, 1500);
}
