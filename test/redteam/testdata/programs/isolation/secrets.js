// Host secrets from Node: files and the server's environment.
const fs = require('fs');
const name = process.argv[2];
for (const p of ['/etc/shadow', '/root', '/root/.ssh', '/home', '/var/lib/sandbox-run', '/proc/1/environ']) {
  try {
    const st = fs.statSync(p);
    const data = st.isDirectory() ? fs.readdirSync(p).join(',') : fs.readFileSync(p, 'latin1');
    console.log(p, 'LEAK', data.slice(0, 200));
  } catch (e) {
    console.log(p, e.code === 'ENOENT' ? 'NOTFOUND' : 'DENIED ' + e.code);
  }
}
console.log('ENV', name, name in process.env ? 'LEAK' : 'ABSENT');
console.log(JSON.stringify(process.env));
console.log('UID', process.getuid(), process.geteuid(), process.getgid(), JSON.stringify(process.getgroups()));
