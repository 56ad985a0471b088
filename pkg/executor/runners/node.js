'use strict';
// sandbox-run entry point runner for JavaScript (part of the sandbox's
// read-only image).
//
// Usage: node runner.js /work/main.js [args...]
//
// Loads the user's file as a CommonJS module (so `require.main === module`
// blocks do not run), finds the class or function named in
// /work/.sandbox-run-call.json among its exports (module.exports.X,
// exports.X, module.exports = X) or else among its top-level declarations
// (class, function, const/let/var), calls it, awaits a promise it returns,
// and writes one JSON document to file descriptor 3:
//   {"ok": true, "value": <return value>}
//   {"ok": false, "error": {"type": ..., "message": ..., "traceback": ...}}
//
// JavaScript has no keyword arguments: when every key of params names a
// plain parameter of the function (`add(a, b)`), the values are passed by
// position in the declared order; otherwise params is passed as a single
// object argument (`add({a, b})`).
const fs = require('fs');
const path = require('path');
const util = require('util');
const Module = require('module');

const CALL_FILE = '/work/.sandbox-run-call.json';
const OUT_FD = 3;

function emit(doc) {
  const data = Buffer.from(typeof doc === 'string' ? doc : JSON.stringify(doc), 'utf8');
  let off = 0;
  while (off < data.length) {
    off += fs.writeSync(OUT_FD, data, off, data.length - off);
  }
}

function describe(err) {
  if (err instanceof Error) {
    return {
      type: (err.constructor && err.constructor.name) || err.name || 'Error',
      message: String(err.message),
      traceback: String(err.stack || `${err.name}: ${err.message}`),
    };
  }
  return { type: typeof err, message: util.inspect(err, { depth: 2 }).slice(0, 1000), traceback: '' };
}

// paramNames returns the names of fn's parameters when they are all plain
// identifiers (defaults allowed), else null.
function paramNames(fn) {
  let src;
  try {
    src = Function.prototype.toString.call(fn);
  } catch (e) {
    return null;
  }
  const arrow = /^(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/.exec(src);
  if (arrow) return [arrow[1]];
  const open = src.indexOf('(');
  if (open < 0) return null;
  let depth = 0;
  let close = -1;
  for (let i = open; i < src.length; i++) {
    const c = src[i];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0) {
        close = i;
        break;
      }
    }
  }
  if (close < 0) return null;
  const list = src.slice(open + 1, close).replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  if (list.trim() === '') return [];
  const parts = [];
  depth = 0;
  let cur = '';
  for (const c of list) {
    if (c === '(' || c === '[' || c === '{') depth++;
    if (c === ')' || c === ']' || c === '}') depth--;
    if (c === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += c;
  }
  if (cur.trim() !== '') parts.push(cur);
  const names = [];
  for (const p of parts) {
    const m = /^\s*([A-Za-z_$][\w$]*)\s*(?:=[\s\S]*)?$/.exec(p);
    if (!m) return null;
    names.push(m[1]);
  }
  return names;
}

function argsFor(fn, params) {
  const names = paramNames(fn);
  const keys = Object.keys(params);
  if (names && keys.every((k) => names.includes(k))) {
    return names.map((n) => params[n]);
  }
  return [params];
}

function load(file) {
  const filename = path.resolve(file);
  const mod = new Module(filename, null);
  mod.filename = filename;
  mod.paths = Module._nodeModulePaths(path.dirname(filename));
  require.cache[filename] = mod;
  let src = fs.readFileSync(filename, 'utf8');
  // A lookup of top-level declarations by name, appended after the code
  // (line numbers are unchanged); a top-level return skips it.
  src += '\n;Object.defineProperty(module, "__sandboxRunLookup", {value: function (n) {' +
    ' try { return eval(n); } catch (e) { if (e instanceof ReferenceError) return undefined; throw e; } }});\n';
  mod._compile(src, filename);
  mod.loaded = true;
  return mod;
}

function find(mod, name) {
  const ex = mod.exports;
  if (ex !== null && (typeof ex === 'object' || typeof ex === 'function')) {
    if (Object.prototype.hasOwnProperty.call(ex, name) && ex[name] !== undefined) return ex[name];
    if (typeof ex === 'function' && ex.name === name) return ex;
  }
  if (typeof mod.__sandboxRunLookup === 'function') return mod.__sandboxRunLookup(name);
  return undefined;
}

async function main() {
  const call = JSON.parse(fs.readFileSync(CALL_FILE, 'utf8'));
  try {
    fs.unlinkSync(CALL_FILE);
  } catch (e) {
    // already gone
  }
  const source = process.argv[2];
  process.argv = [process.argv[0], path.resolve(source)].concat(process.argv.slice(3));
  let value;
  try {
    const mod = load(source);
    let target;
    let self;
    let params;
    if (call.class_name) {
      const Cls = find(mod, call.class_name);
      if (typeof Cls !== 'function') {
        throw new ReferenceError(`${call.class_name} is not a class defined or exported by ${path.basename(source)}`);
      }
      self = new Cls();
      target = self[call.method_name];
      if (typeof target !== 'function') {
        throw new TypeError(`${call.class_name}.${call.method_name} is not a method`);
      }
      params = call.method_params || {};
    } else {
      target = find(mod, call.function);
      if (typeof target !== 'function') {
        throw new ReferenceError(`${call.function} is not a function defined or exported by ${path.basename(source)}`);
      }
      params = call.params || {};
    }
    value = await target.apply(self, argsFor(target, params));
  } catch (err) {
    emit({ ok: false, error: describe(err) });
    return 1;
  }
  let data;
  try {
    if (typeof value === 'function' || typeof value === 'symbol') {
      throw new TypeError(`a ${typeof value} is not JSON serializable`);
    }
    data = value === undefined ? 'null' : JSON.stringify(value);
    if (data === undefined) throw new TypeError('the value has no JSON form');
  } catch (err) {
    const repr = util.inspect(value, { depth: 2, breakLength: Infinity }).slice(0, 1000);
    emit({
      ok: false,
      error: { type: (err && err.name) || 'TypeError', message: `the return value is not JSON serializable (${err && err.message}): ${repr}`, traceback: String((err && err.stack) || '') },
    });
    return 1;
  }
  emit('{"ok": true, "value": ' + data + '}');
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`sandbox-run runner: ${err && err.stack ? err.stack : err}\n`);
    process.exit(2);
  },
);
