// The API server: argv[2] is the port of an HTTP server the test runs on
// the host's 127.0.0.1 (standing in for sandbox-run's API). Unreachable.
const http = require('http');
const net = require('net');
const port = Number(process.argv[2]);

function get(host) {
  return new Promise((resolve) => {
    const req = http.get({ host, port, path: '/api/v1/execute', timeout: 2000 }, (res) => {
      resolve('REACHED ' + res.statusCode);
      res.resume();
    });
    req.on('timeout', () => { req.destroy(); resolve('TIMEOUT'); });
    req.on('error', (e) => resolve(e.code || e.message));
  });
}

function raw(host) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, timeout: 2000 }, () => {
      s.end('POST /api/v1/execute HTTP/1.0\r\n\r\n');
      resolve('CONNECTED');
    });
    s.on('timeout', () => { s.destroy(); resolve('TIMEOUT'); });
    s.on('error', (e) => resolve(e.code || e.message));
  });
}

(async () => {
  for (const host of ['127.0.0.1', '0.0.0.0']) {
    console.log('http', host, await get(host));
    console.log('tcp', host, await raw(host));
  }
  try {
    const r = await fetch(`http://127.0.0.1:${port}/health`);
    console.log('fetch REACHED', r.status);
  } catch (e) {
    console.log('fetch', (e.cause && e.cause.code) || e.message);
  }
})();
