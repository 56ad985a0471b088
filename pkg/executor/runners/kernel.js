// sandbox-run's JavaScript kernel: the long-lived interpreter of an
// interpreter session (Node, no dependencies). Commands come one per line
// on stdin, read by a worker thread (the main thread may be busy in a
// cell); each cell is answered with one line of JSON on descriptor 3. A
// cell's output goes to the real stdout and stderr as it comes (pipes are
// written synchronously on Linux), closed by the command's marker.
//
//   {"cell": "x + 1", "marker": "..."}   run a cell in the session's context
//   {"interrupt": true}                  stop the running cell (SIGINT)
//
// Declarations (let, const, function, class) live in one context from
// cell to cell; the value of a cell's last expression is its result
// (util.inspect), a promise's once settled.
//
// Top-level await, as in Node's REPL (lib/internal/repl/await.js) but
// without a parser to lean on (no acorn): a cell is compiled as a script
// first; only one that fails to (a SyntaxError) and has an `await` token
// is rewritten (awaitCell) into an async function called at once, whose
// promise is the cell's value:
//
//   const {a, b: [c]} = await f()      var g; let a, c, K; (async () => {this.g = g;
//   function g() {}               ->   0,    {a, b: [c]} = await f()
//   class K {}                         function g() {}
//   g(a)                               K=class K {};;return (
//                                      g(a))
//                                      })()
//
// Top-level let, const (made let), class and function declarations, and
// every var not inside a function (in blocks and for heads too), are
// hoisted out of the function as the context's globals, and assigned
// where they were declared (functions as the cell starts), so they
// persist; the last statement, if an expression statement, is returned.
// The hoisted line is line 0 (lineOffset): the cell's lines keep their
// numbers in errors and stacks, and their columns except where `C=` or
// `return (` went. A small tokenizer (strings, comments, templates and
// their substitutions, regular expressions told from division by the
// token before them) and a statement splitter that follows ASI as the
// grammar mostly does stand in for a parser. Limits, in a cell that
// awaits at top level only (other cells run as scripts, untouched):
// - const bindings become let (reassignable), and a declaration whose
//   initializer throws leaves its names undefined instead of in TDZ;
// - a function declared in a block (sloppy Annex B) stays the cell's;
// - the value is undefined when the last statement is not an expression
//   statement (an if, a loop, a block, a declaration);
// - a syntax error is V8's for the rewritten code (same line; the text it
//   quotes may show the rewrite, `0,` for a declaration's keyword, and a
//   name declared twice is reported on line 0); for one the tokenizer
//   cannot read (an unterminated string, unbalanced brackets), V8's for
//   the cell wrapped as it is, if that fails, else the script's; a cell
//   with a top-level return is not rewritten (the script's error);
// - code the splitter misreads (a block right after an expression with
//   no semicolon, a newline where ASI is subtle) may keep a var in the
//   cell, lose the value or fail to compile;
// - stacks show one more frame: the wrapper's call on the last line + 1.
// An interrupt stops a cell's synchronous part (breakOnSigint) and, while
// a cell awaits (any cell whose value is a promise), ends the wait: the
// cell answers at once, though what it awaited goes on in the background
// (its later output lands in the next cell). A synchronous loop after an
// await cannot be interrupted: the executor kills the kernel after its
// grace and the next cell starts a new one.
"use strict";
const fs = require("fs");
const util = require("util");
const vm = require("vm");
const { Worker, isMainThread, parentPort } = require("worker_threads");

if (!isMainThread) {
  // The reader: commands to the main thread, interrupts as signals.
  let buf = "";
  const chunk = Buffer.alloc(64 * 1024);
  for (;;) {
    let n = 0;
    try {
      n = fs.readSync(0, chunk, 0, chunk.length, null);
    } catch (e) {
      if (e.code === "EAGAIN") continue;
      break;
    }
    if (n === 0) break;
    buf += chunk.toString("utf8", 0, n);
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let cmd;
      try {
        cmd = JSON.parse(line);
      } catch (e) {
        continue;
      }
      if (cmd.interrupt) {
        process.kill(process.pid, "SIGINT");
      } else {
        parentPort.postMessage(cmd);
      }
    }
  }
  parentPort.postMessage(null);
  return;
}

// Between cells an interrupt stops nothing; while a cell awaits, it ends
// the wait (interrupted rejects it).
let interrupted = null;
process.on("SIGINT", () => {
  if (interrupted) interrupted();
});
const context = vm.createContext({
  console, process, require, Buffer, setTimeout, setInterval, clearTimeout, clearInterval,
  setImmediate, clearImmediate, URL, URLSearchParams, TextEncoder, TextDecoder, structuredClone,
  fetch: globalThis.fetch, queueMicrotask,
});
let busy = Promise.resolve();

function answer(a, marker) {
  fs.writeSync(1, marker);
  fs.writeSync(2, marker);
  fs.writeSync(3, JSON.stringify(a) + "\n");
}

async function run(cmd) {
  const a = { status: "completed" };
  try {
    let value = compile(cmd.cell || "").runInContext(context, { breakOnSigint: true });
    if (value && typeof value.then === "function") {
      const settled = value;
      value = await new Promise((resolve, reject) => {
        interrupted = () => {
          const e = new Error("Script execution was interrupted by `SIGINT`");
          e.stack = `Error: ${e.message} (the cell was awaiting; what it awaited may still finish)`;
          reject(e);
        };
        settled.then(resolve, reject);
      }).finally(() => {
        interrupted = null;
      });
    }
    if (value !== undefined) a.result = { "text/plain": util.inspect(value) };
  } catch (e) {
    a.status = "error";
    // The context's errors are its own realm's: not instances of ours.
    const isErr = e !== null && typeof e === "object" && typeof e.message === "string";
    const err = isErr ? e : { name: "Error", message: String(e), stack: "Uncaught " + util.inspect(e) };
    a.exception = { type: err.name || "Error", message: String(err.message), traceback: String(err.stack || err) };
    fs.writeSync(2, a.exception.traceback + "\n");
  }
  answer(a, cmd.marker || "");
}

const reader = new Worker(__filename);
reader.on("message", (cmd) => {
  if (cmd === null) {
    process.exit(0);
  }
  busy = busy.then(() => run(cmd));
});

// compile compiles a cell as a script or, if it awaits at top level, as
// awaitCell's rewrite of it.
function compile(code) {
  try {
    return new vm.Script(code, { filename: "<cell>" });
  } catch (e) {
    if (!e || e.name !== "SyntaxError") throw e;
    let wrapped;
    try {
      wrapped = awaitCell(code);
    } catch (unreadable) {
      // The tokenizer cannot read it: V8's error for the cell in an async
      // function, if it has one (else the script's).
      new vm.Script(`(async () => {\n${code}\n})()`, { filename: "<cell>", lineOffset: -1 });
      throw e;
    }
    if (wrapped === null) throw e;
    return new vm.Script(wrapped, { filename: "<cell>", lineOffset: -1 });
  }
}

// Top-level await: see the header. Tokens are {t, v, s, e, nl}: t is "n" (a
// name or keyword), "p" (a punctuator), "s" (a string), "#" (a number),
// "`" (a template) or "/" (a regular expression); v the text of names and
// punctuators (null for the others); s and e its offsets; nl whether a line
// ended before it. Brackets have m (the index of their match) and k (a
// brace's kind: block, obj, fn, arrow or class; a parenthesis's: cond
// after if, for, while..., else paren; arr); fn says a token is inside a
// function's body.

// Names after which an expression starts (a / begins a regular expression,
// a { an object): they do not end an expression.
const beforeExpr = new Set(["return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case",
  "do", "else", "yield", "await", "extends", "let", "const", "var", "export", "default", "function", "class"]);
const condKeywords = new Set(["if", "for", "while", "with", "switch", "catch"]);
const reserved = new Set(["break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do",
  "else", "export", "extends", "false", "finally", "for", "function", "if", "import", "in", "instanceof", "new", "null",
  "return", "super", "switch", "this", "throw", "true", "try", "typeof", "var", "void", "while", "with"]);
const punctRe = /(?:>>>=|\.\.\.|===|!==|\*\*=|<<=|>>=|>>>|&&=|\|\|=|\?\?=|=>|==|!=|<=|>=|&&|\|\||\?\?|\?\.(?!\d)|\+\+|--|[-+*/%&|^]=|\*\*|<<|>>|[{}()[\];,<>+\-*/%&|^!~?:=.@])/y;
const nameRe = /(?:[A-Za-z_$#\\\u0080-\uffff][\w$\\\u0080-\uffff]*)/y;
const numberRe = /(?:0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?)n?/y;
const spaceRe = /[^\S\n\r\u2028\u2029]+/y;
// ends says a token may end an expression (a / after it divides): a
// name, a literal, a closing bracket, a postfix ++ or --.
const ends = (p) => (p.t === "n" ? !beforeExpr.has(p.v) : p.t !== "p" || /^[)\]}]$/.test(p.v) || p.postfix === true);
const bodies = new Set(["block", "fn", "arrow"]);

// lex returns code's tokens (a template is one) and how many await
// tokens it has (in templates' substitutions too); it throws on what it
// cannot read (an unterminated string, unbalanced brackets).
function lex(code) {
  const toks = [];
  let awaits = 0;
  const match = (re, i) => {
    re.lastIndex = i;
    const m = re.exec(code);
    return m ? m[0] : null;
  };
  // scan reads tokens from i to the end or, in a template's substitution
  // (sub), to the } closing it; it returns where it stopped.
  function scan(i, sub) {
    const out = sub ? [] : toks;
    const stack = []; // open brackets: {i (in out), k, fn, q (pending ?s)}
    let nl = false, prev = sub ? { t: "p", v: "(" } : null, prev2 = null, classAt = -1, q = 0;
    while (i < code.length) {
      const c = code[i];
      if (c === "\n" || c === "\r" || c === "\u2028" || c === "\u2029") {
        nl = true;
        i++;
        continue;
      }
      const sp = match(spaceRe, i);
      if (sp) {
        i += sp.length;
        continue;
      }
      if (code.startsWith("//", i) || (i === 0 && code.startsWith("#!"))) {
        while (i < code.length && !/[\n\r\u2028\u2029]/.test(code[i])) i++;
        continue;
      }
      if (code.startsWith("/*", i)) {
        const j = code.indexOf("*/", i + 2);
        if (j < 0) throw new SyntaxError("an unterminated comment");
        if (/[\n\r\u2028\u2029]/.test(code.slice(i, j))) nl = true;
        i = j + 2;
        continue;
      }
      const tok = { t: "p", v: null, s: i, e: i, nl, fn: stack.length > 0 && stack[stack.length - 1].fn };
      nl = false;
      let m;
      if (c === '"' || c === "'") {
        let j = i + 1;
        while (code[j] !== c) {
          if (j >= code.length || code[j] === "\n" || code[j] === "\r") throw new SyntaxError("an unterminated string");
          j += code[j] !== "\\" ? 1 : code.startsWith("\r\n", j + 1) ? 3 : 2;
        }
        tok.t = "s";
        tok.e = j + 1;
      } else if (c === "`") {
        let j = i + 1;
        while (code[j] !== "`") {
          if (j >= code.length) throw new SyntaxError("an unterminated template");
          if (code[j] === "\\") j += 2;
          else if (code[j] === "$" && code[j + 1] === "{") j = scan(j + 2, true);
          else j++;
        }
        tok.t = "`";
        tok.e = j + 1;
      } else if ((m = /[0-9.]/.test(c) && match(numberRe, i))) {
        tok.t = "#";
        tok.e = i + m.length;
      } else if ((m = match(nameRe, i))) {
        tok.t = "n";
        tok.v = m;
        tok.e = i + m.length;
      } else if (c === "/" && (!prev || !ends(prev) || (prev.v === ")" && prev.k === "cond") || (prev.v === "}" && prev.k !== "obj"))) {
        let j = i + 1, inClass = false;
        while (inClass || code[j] !== "/") {
          if (j >= code.length || code[j] === "\n" || code[j] === "\r") throw new SyntaxError("an unterminated regular expression");
          if (code[j] === "\\") j++;
          else if (code[j] === "[") inClass = true;
          else if (code[j] === "]") inClass = false;
          j++;
        }
        tok.t = "/";
        tok.e = j + 1 + (match(/[\w$]*/y, j + 1) || "").length;
      } else if ((m = match(punctRe, i))) {
        tok.v = m;
        tok.e = i + m.length;
        if (m === "++" || m === "--") tok.postfix = !tok.nl && prev !== null && ends(prev);
      } else {
        throw new SyntaxError("an unexpected character");
      }
      i = tok.e;
      const v = tok.v;
      if (tok.t === "n") {
        if (v === "await" && !(prev && (prev.v === "." || prev.v === "?."))) awaits++;
        if (v === "class" && !(prev && (prev.v === "." || prev.v === "?."))) classAt = stack.length;
      } else if (v === "(" || v === "[" || v === "{") {
        let k = v === "(" ? "paren" : "arr";
        if (v === "(" && prev && (condKeywords.has(prev.v) || (prev.v === "await" && prev2 && prev2.v === "for"))) k = "cond";
        if (v === "{") {
          if (classAt === stack.length) k = "class";
          else if (!prev || prev.v === ";" || prev.v === "}" || prev.v === "{") k = "block";
          else if (prev.v === ")") k = prev.k === "cond" ? "block" : "fn";
          else if (prev.v === "=>") k = "arrow";
          else if (prev.v === "static") k = "fn";
          else if (prev.v === ":") {
            const top = stack[stack.length - 1];
            k = prev.ternary || (top && !bodies.has(top.k)) ? "obj" : "block";
          } else if (prev.v === "else" || prev.v === "try" || prev.v === "finally" || prev.v === "do") k = "block";
          else k = prev.t === "p" || beforeExpr.has(prev.v) ? "obj" : "block";
          if (classAt === stack.length) classAt = -1;
        }
        tok.k = k;
        stack.push({ i: out.length, k, q, fn: tok.fn || k === "fn" || k === "arrow" });
        q = 0;
      } else if (v === ")" || v === "]" || v === "}") {
        if (!stack.length) {
          if (sub && v === "}") return i;
          throw new SyntaxError("an unbalanced " + v);
        }
        const open = stack.pop();
        if ("([{".indexOf(out[open.i].v) !== ")]}".indexOf(v)) throw new SyntaxError("an unbalanced " + v);
        out[open.i].m = out.length;
        tok.m = open.i;
        tok.k = open.k;
        tok.fn = stack.length > 0 && stack[stack.length - 1].fn;
        q = open.q;
      } else if (v === "?") {
        q++;
      } else if (v === ":" && q > 0) {
        q--;
        tok.ternary = true;
      }
      out.push(tok);
      prev2 = prev;
      prev = tok;
    }
    if (sub || stack.length) throw new SyntaxError("an unexpected end");
    return i;
  }
  scan(0, false);
  return { toks, awaits };
}

// awaitCell returns code rewritten to run in an async function with its
// declarations made the context's (see the header), or null: no await,
// or a top-level return. It throws on code it cannot read.
function awaitCell(code) {
  const { toks: T, awaits } = lex(code);
  if (!awaits) return null;
  const is = (i, v) => i < T.length && T[i].v === v;
  const isOpen = (t) => t.v === "(" || t.v === "[" || t.v === "{";
  const paren = (j) => (is(j, "(") ? T[j].m + 1 : j);
  const braces = (j) => (is(j, "{") ? T[j].m + 1 : j);
  const semi = (j) => (is(j, ";") ? j + 1 : j);
  // goesOn says a token goes on with an expression after a line break
  // (else ASI ends the statement there).
  const goesOn = (n) =>
    n.t === "`" || (n.t === "n" ? n.v === "in" || n.v === "instanceof" : n.t === "p" && !/^(?:[{!~@;]|\+\+|--|\.\.\.)$/.test(n.v));
  // body skips to the end of the braces that follow (a function's or a
  // class's), over what comes before them.
  const body = (j) => {
    while (j < T.length && !is(j, "{") && !is(j, ";")) j = isOpen(T[j]) ? T[j].m + 1 : j + 1;
    return braces(j);
  };
  // expr skips an expression from i: to a ; (or a , when comma), a closing
  // bracket, or a line break where ASI ends the statement.
  function expr(i, comma) {
    for (let first = true; i < T.length; first = false) {
      const t = T[i], p = T[i - 1];
      if (!first && t.nl && (p.v === "}" && p.k === "arrow" ? t.v !== "," : ends(p) && !goesOn(t))) return i;
      if (t.v === ";" || t.v === ")" || t.v === "]" || t.v === "}" || (comma && t.v === ",")) return i;
      if ((t.v === "function" || t.v === "class") && !(p && (p.v === "." || p.v === "?."))) i = body(i + 1);
      else i = isOpen(t) ? t.m + 1 : i + 1;
    }
    return i;
  }
  // decl reads a declaration's bindings from j (after its keyword): their
  // names, and where it ends; null if it is not one.
  function decl(j) {
    const names = [];
    for (;;) {
      if (j < T.length && T[j].t === "n" && !reserved.has(T[j].v)) names.push(T[j++].v);
      else if (is(j, "[") || is(j, "{")) {
        pattern(j, names);
        j = T[j].m + 1;
      } else return null;
      if (is(j, "=")) j = expr(j + 1, true);
      if (!is(j, ",")) return { names, e: j };
      j++;
    }
  }
  // pattern adds the names a destructuring pattern at o binds.
  function pattern(o, names) {
    const close = T[o].m, obj = T[o].v === "{";
    for (let j = o + 1; j < close; ) {
      let k = j, colon = -1, eq = -1;
      for (; k < close && T[k].v !== ","; k = isOpen(T[k]) ? T[k].m + 1 : k + 1) {
        if (obj && colon < 0 && eq < 0 && T[k].v === ":") colon = k;
        if (eq < 0 && T[k].v === "=") eq = k;
      }
      let t = colon >= 0 ? colon + 1 : j;
      if (is(t, "...")) t++;
      if (t < k && T[t].t === "n") names.push(T[t].v);
      else if (t < k && (is(t, "[") || is(t, "{"))) pattern(t, names);
      j = k + 1;
    }
  }
  // stmt reads the statement at i: its kind k, where it ends (e), an
  // expression's end (x), a declaration's names or a function's or
  // class's name.
  function stmt(i) {
    if (i >= T.length) return { k: "none", e: i };
    const t = T[i], v = t.v;
    if (v === ";") return { k: "empty", e: i + 1 };
    if (v === "{") return { k: "block", e: t.m + 1 };
    if (t.t === "n") {
      switch (v) {
        case "if": {
          let j = stmt(paren(i + 1)).e;
          if (is(j, "else")) j = stmt(j + 1).e;
          return { k: v, e: j };
        }
        case "for":
          return { k: v, e: stmt(paren(is(i + 1, "await") ? i + 2 : i + 1)).e };
        case "while":
        case "with":
          return { k: v, e: stmt(paren(i + 1)).e };
        case "do": {
          let j = stmt(i + 1).e;
          if (is(j, "while")) j = paren(j + 1);
          return { k: v, e: semi(j) };
        }
        case "try": {
          let j = braces(i + 1);
          if (is(j, "catch")) j = braces(paren(j + 1));
          if (is(j, "finally")) j = braces(j + 1);
          return { k: v, e: j };
        }
        case "switch":
          return { k: v, e: braces(paren(i + 1)) };
        case "async":
          if (!is(i + 1, "function") || T[i + 1].nl) break;
          i++;
        // fall through
        case "function": {
          const j = is(i + 1, "*") ? i + 2 : i + 1;
          return { k: "function", name: j < T.length && T[j].t === "n" ? T[j].v : null, e: body(j) };
        }
        case "class":
          return { k: v, name: i + 1 < T.length && T[i + 1].t === "n" ? T[i + 1].v : null, e: body(i + 1) };
        case "let":
          if (!(i + 1 < T.length && (T[i + 1].t === "n" || is(i + 1, "[") || is(i + 1, "{")))) break;
        // fall through
        case "const":
        case "var": {
          const d = decl(i + 1);
          if (!d) break;
          return { k: v, names: d.names, e: semi(d.e) };
        }
        case "return":
        case "throw":
        case "break":
        case "continue": {
          let j = i + 1;
          if (j < T.length && !(T[j].nl && v !== "throw") && !is(j, ";") && !is(j, "}")) j = expr(j);
          return { k: v, e: semi(j) };
        }
        default:
          if (is(i + 1, ":") && !reserved.has(v)) return { k: "label", e: stmt(i + 2).e };
      }
    }
    const x = expr(i);
    return { k: "expr", x, e: semi(x) };
  }

  const stmts = [];
  for (let i = 0; i < T.length; ) {
    const s = stmt(i);
    if (s.e <= i || s.k === "return") return null;
    s.s = i;
    stmts.push(s);
    i = s.e;
  }
  const edits = []; // [offset, length replaced, text]
  const vars = [], lets = [], fns = [];
  const keyword = (t, forHead) => edits.push([t.s, t.e - t.s, forHead ? " ".repeat(t.e - t.s) : "0," + " ".repeat(t.e - t.s - 2)]);
  // Every var outside functions (the statement's own, in blocks, in for
  // heads), then the top-level let, const, class and function.
  for (let i = 0; i < T.length; i++) {
    const t = T[i];
    if (t.v !== "var" || t.fn || (i > 0 && (T[i - 1].v === "." || T[i - 1].v === "?."))) continue;
    const d = decl(i + 1);
    if (!d) continue;
    vars.push(...d.names);
    keyword(t, i >= 2 && is(i - 1, "(") && (is(i - 2, "for") || is(i - 2, "await")));
  }
  for (const s of stmts) {
    const t = T[s.s];
    if (s.k === "let" || s.k === "const") {
      lets.push(...s.names);
      keyword(t, false);
    } else if (s.k === "class" && s.name) {
      lets.push(s.name);
      edits.push([t.s, 0, s.name + "="], [T[s.e - 1].e, 0, ";"]);
    } else if (s.k === "function" && s.name) {
      vars.push(s.name);
      fns.push(s.name);
    }
  }
  // Functions are the context's from the cell's start: after its
  // directives ("use strict"), if it has any.
  const exported = fns.map((f) => `this.${f} = ${f}; `).join("");
  let directives = 0;
  while (directives < stmts.length - 1 && stmts[directives].k === "expr" && stmts[directives].x === stmts[directives].s + 1 &&
    T[stmts[directives].s].t === "s") directives++;
  if (directives > 0 && exported) edits.push([T[stmts[directives - 1].e - 1].e, 0, "; " + exported]);
  // The last expression is returned; "return (" goes after the token
  // before it (or in the wrapper's first line), so that its columns stay.
  const last = stmts[stmts.length - 1];
  let returned = "";
  if (last && last.k === "expr") {
    if (last.s > 0) edits.push([T[last.s - 1].e, 0, ";return ("]);
    else returned = "return (";
    edits.push([T[last.x - 1].e, 0, ")"]);
  }
  edits.sort((a, b) => a[0] - b[0] || (a[1] > 0) - (b[1] > 0)); // inserts before a replacement
  let out = "", at = 0;
  for (const [s, n, text] of edits) {
    out += code.slice(at, s) + text;
    at = s + n;
  }
  out += code.slice(at);
  if (out.startsWith("#!")) out = "//" + out.slice(2);
  // A let twice is the script's SyntaxError; a var twice is not.
  const hoisted = (vars.length ? `var ${[...new Set(vars)].join(", ")}; ` : "") + (lets.length ? `let ${lets.join(", ")}; ` : "");
  return `${hoisted}(async () => {${directives > 0 ? "" : exported}${returned}\n${out}\n})()`;
}
