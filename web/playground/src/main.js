// The sandbox-run playground: a CodeMirror editor, language and version
// pickers filled from GET /api/sandbox/languages, an examples menu, and
// interactive runs over the WebSocket (GET /api/sandbox/ws): output streams
// in, typed lines go to the program's stdin. Without a WebSocket it falls
// back to POST /api/sandbox/execute (Accept: text/event-stream). The draft
// (code, version, stdin, args) is kept per language in localStorage.
import { EditorState, Compartment } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection, rectangularSelection, crosshairCursor,
} from "@codemirror/view";
import { defaultKeymap, history as undoHistory, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  syntaxHighlighting, HighlightStyle, indentOnInput, bracketMatching,
  foldGutter, foldKeymap, StreamLanguage,
} from "@codemirror/language";
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { tags as t } from "@lezer/highlight";
import { examples } from "./examples.js";

const $ = (id) => document.getElementById(id);

// Language support, loaded on demand (each is its own chunk).
const legacy = (load) => async () => StreamLanguage.define(await load());
const modes = {
  python: async () => (await import("@codemirror/lang-python")).python(),
  javascript: async () => (await import("@codemirror/lang-javascript")).javascript(),
  typescript: async () => (await import("@codemirror/lang-javascript")).javascript({ typescript: true }),
  c: async () => (await import("@codemirror/lang-cpp")).cpp(),
  cpp: async () => (await import("@codemirror/lang-cpp")).cpp(),
  java: async () => (await import("@codemirror/lang-java")).java(),
  rust: async () => (await import("@codemirror/lang-rust")).rust(),
  go: async () => (await import("@codemirror/lang-go")).go(),
  bash: legacy(async () => (await import("@codemirror/legacy-modes/mode/shell")).shell),
  perl: legacy(async () => (await import("@codemirror/legacy-modes/mode/perl")).perl),
  tcl: legacy(async () => (await import("@codemirror/legacy-modes/mode/tcl")).tcl),
  ruby: legacy(async () => (await import("@codemirror/legacy-modes/mode/ruby")).ruby),
  lua: legacy(async () => (await import("@codemirror/legacy-modes/mode/lua")).lua),
};

const state = {
  languages: [], // from the API
  lang: "",
  drafts: {}, // language → draft, for when localStorage is not there
  loading: 0, // > 0 while the page itself fills the editor and fields
  linked: false, // the address holds a link (#z=) to what is shown
  run: null, // the running execution: {stop, send?, eof?}
};

// ---------------------------------------------------------------- editor

// Token colours are CSS variables: style.css has a light and a dark set,
// chosen by prefers-color-scheme.
const highlight = HighlightStyle.define([
  { tag: t.meta, color: "var(--tok-meta)" },
  { tag: t.link, textDecoration: "underline" },
  { tag: t.heading, textDecoration: "underline", fontWeight: "bold" },
  { tag: t.emphasis, fontStyle: "italic" },
  { tag: t.strong, fontWeight: "bold" },
  { tag: t.strikethrough, textDecoration: "line-through" },
  { tag: t.keyword, color: "var(--tok-keyword)" },
  { tag: [t.atom, t.bool, t.url, t.contentSeparator, t.labelName], color: "var(--tok-atom)" },
  { tag: [t.literal, t.inserted], color: "var(--tok-number)" },
  { tag: [t.string, t.deleted], color: "var(--tok-string)" },
  { tag: [t.regexp, t.escape, t.special(t.string)], color: "var(--tok-regexp)" },
  { tag: t.definition(t.variableName), color: "var(--tok-def)" },
  { tag: t.local(t.variableName), color: "var(--tok-local)" },
  { tag: [t.typeName, t.namespace], color: "var(--tok-type)" },
  { tag: t.className, color: "var(--tok-class)" },
  { tag: [t.special(t.variableName), t.macroName], color: "var(--tok-macro)" },
  { tag: t.definition(t.propertyName), color: "var(--tok-prop)" },
  { tag: t.comment, color: "var(--tok-comment)", fontStyle: "italic" },
  { tag: t.invalid, color: "var(--tok-invalid)" },
]);

const theme = EditorView.theme({
  "&": { color: "var(--fg)", backgroundColor: "var(--panel)" },
  ".cm-content": { caretColor: "var(--fg)" },
  ".cm-cursor, .cm-dropCursor": { borderLeftColor: "var(--fg)" },
  ".cm-gutters": { backgroundColor: "var(--gutter)", color: "var(--muted)", borderColor: "var(--line)" },
  ".cm-activeLine, .cm-activeLineGutter": { backgroundColor: "var(--active-line)" },
  "&.cm-focused > .cm-scroller > .cm-selectionLayer .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection":
    { backgroundColor: "var(--selection)" },
  ".cm-selectionMatch, .cm-searchMatch": { backgroundColor: "var(--match)" },
  "&.cm-focused .cm-matchingBracket": { backgroundColor: "var(--match)", outline: "1px solid var(--line-hover)" },
  ".cm-panels": { backgroundColor: "var(--bg)", color: "var(--fg)" },
  ".cm-foldPlaceholder": { backgroundColor: "var(--chip)", borderColor: "var(--line)", color: "var(--muted)" },
});

// The server's CSP allows the editor's generated styles by this nonce.
const nonce = document.querySelector('meta[name="csp-nonce"]')?.content || "";
const langConf = new Compartment();
const dark = window.matchMedia?.("(prefers-color-scheme: dark)");
const darkConf = new Compartment();
const view = new EditorView({
  parent: $("editor"),
  state: EditorState.create({
    doc: "",
    extensions: [
      lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), undoHistory(), foldGutter(),
      drawSelection(), EditorState.allowMultipleSelections.of(true), indentOnInput(),
      syntaxHighlighting(highlight), bracketMatching(), closeBrackets(),
      rectangularSelection(), crosshairCursor(), highlightActiveLine(), highlightSelectionMatches(),
      keymap.of([
        { key: "Mod-Enter", run: () => (run(), true) },
        ...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap, indentWithTab,
      ]),
      langConf.of([]),
      theme,
      darkConf.of(EditorView.darkTheme.of(!!dark?.matches)),
      EditorView.contentAttributes.of({ "aria-label": "Code" }),
      EditorView.updateListener.of((u) => {
        if (u.docChanged && !state.loading) edited();
      }),
      EditorView.cspNonce.of(nonce),
    ],
  }),
});
dark?.addEventListener("change", () => view.dispatch({ effects: darkConf.reconfigure(EditorView.darkTheme.of(dark.matches)) }));

const getCode = () => view.state.doc.toString();
function setCode(code) {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: code } });
}

let modeSeq = 0;
async function setMode(lang) {
  const seq = ++modeSeq;
  let ext = [];
  try {
    if (modes[lang]) ext = await modes[lang]();
  } catch (e) {
    console.warn("syntax highlighting for", lang, e);
  }
  if (seq === modeSeq) view.dispatch({ effects: langConf.reconfigure(ext) });
}

// ------------------------------------------------------------------ draft
// sandbox-run.draft.<language> = {code, version, stdin, args} (version ""
// for the server's default), sandbox-run.language = the last one used.

const DRAFT = "sandbox-run.draft.";
const LANG = "sandbox-run.language";
const store = {
  get(k) {
    try {
      return localStorage.getItem(k);
    } catch {
      return null;
    }
  },
  set(k, v) {
    try {
      localStorage.setItem(k, v);
    } catch {}
  },
};

function loadDraft(lang) {
  try {
    return JSON.parse(store.get(DRAFT + lang)) || state.drafts[lang] || null;
  } catch {
    return state.drafts[lang] || null;
  }
}

function currentDraft() {
  const v = $("version");
  const picked = v.selectedOptions[0];
  return {
    code: getCode(),
    version: picked && !picked.dataset.default ? v.value : "",
    stdin: $("stdin").value,
    args: $("args").value,
  };
}

function saveDraft() {
  if (!state.lang || state.loading || state.linked) return;
  const d = currentDraft();
  state.drafts[state.lang] = d;
  store.set(DRAFT + state.lang, JSON.stringify(d));
  store.set(LANG, state.lang);
}

// edited: the person changed what is shown. What a link showed becomes the
// draft, and the address no longer holds the link (a reload shows the
// draft, not the link again).
function edited() {
  if (state.loading) return;
  unlink();
  saveDraft();
}

function unlink() {
  if (!state.linked) return;
  state.linked = false;
  history.replaceState(null, "", location.pathname + location.search);
}

// -------------------------------------------------------------- languages

const langInfo = (lang) => state.languages.find((l) => l.name === lang);

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

// fillVersions lists the language's installed versions, the default
// selected unless want names another.
function fillVersions(lang, want) {
  const info = langInfo(lang);
  let vs = (info?.versions || []).filter((v) => v.available);
  if (!vs.length && info?.version) vs = [{ version: info.version, default: true, default_limits: info.default_limits }];
  const sel = $("version");
  sel.replaceChildren(
    ...vs.map((v) => {
      const o = option(v.version, v.default ? `${v.version} (default)` : v.version);
      if (v.default) o.dataset.default = "true";
      return o;
    }),
  );
  const pick = vs.find((v) => want && v.version === want) || vs.find((v) => v.default) || vs[0];
  sel.value = pick?.version ?? "";
  sel.disabled = vs.length < 2;
  showLimits();
}

function showLimits() {
  const info = langInfo(state.lang);
  const v = info?.versions?.find((v) => v.version === $("version").value);
  const d = v?.default_limits || info?.default_limits || {};
  $("timeout").placeholder = d.timeout_seconds ?? "";
  $("memory").placeholder = d.memory_mb ?? "";
}

function fillExamples(lang) {
  const sel = $("example");
  const names = Object.keys(examples[lang] || {});
  sel.replaceChildren(option("", names.length ? "Choose…" : "none"), ...names.map((n) => option(n, n)));
  sel.disabled = !names.length;
}

const firstExample = (lang) => Object.values(examples[lang] || {})[0]?.code ?? "";

function loadExample(name) {
  const ex = examples[state.lang]?.[name];
  if (!ex) return;
  state.loading++;
  try {
    setCode(ex.code);
    $("stdin").value = ex.stdin ?? "";
    $("args").value = ex.args ?? "";
  } finally {
    state.loading--;
  }
  edited();
}

// selectLanguage shows lang with d (a draft: from a link, or the fields as
// they are), or else its saved draft, or else its first example.
function selectLanguage(lang, d) {
  state.loading++;
  try {
    state.lang = lang;
    $("language").value = lang;
    d ??= loadDraft(lang) || {};
    fillVersions(lang, d.version);
    fillExamples(lang);
    setCode(d.code ?? firstExample(lang));
    $("stdin").value = d.stdin ?? "";
    $("args").value = d.args ?? "";
  } finally {
    state.loading--;
  }
  setMode(lang);
}

function resolveLanguage(name) {
  const n = (name || "").toLowerCase();
  const l = state.languages.find((l) => l.name === n || l.aliases.includes(n));
  return l?.name;
}

async function loadLanguages() {
  try {
    const resp = await fetch("/api/sandbox/languages", { headers: authHeaders() });
    if (!resp.ok) throw new Error(await errorText(resp));
    state.languages = await resp.json();
  } catch (e) {
    state.languages = [];
    notice(`languages: ${e.message}`, true);
  }
  $("language").replaceChildren(...state.languages.map((l) => option(l.name, l.name)));
  $("run").disabled = state.languages.length === 0;
}

// ------------------------------------------------------------------ files

function addFile(name = "", content = "") {
  const row = document.createElement("div");
  row.className = "file";
  const head = document.createElement("div");
  head.className = "file-head";
  const n = document.createElement("input");
  n.placeholder = "name, e.g. data.txt";
  n.value = name;
  n.spellcheck = false;
  n.className = "file-name";
  n.setAttribute("aria-label", "File name");
  const rm = document.createElement("button");
  rm.type = "button";
  rm.textContent = "Remove";
  rm.onclick = () => (row.remove(), countFiles());
  const c = document.createElement("textarea");
  c.rows = 3;
  c.spellcheck = false;
  c.placeholder = "content";
  c.value = content;
  c.className = "file-content";
  c.setAttribute("aria-label", "File content");
  head.append(n, rm);
  row.append(head, c);
  $("files").append(row);
  $("files-box").open = true;
  countFiles();
}

function countFiles() {
  const n = $("files").children.length;
  $("files-count").textContent = n ? `(${n})` : "";
}

function getFiles() {
  const files = {};
  for (const row of $("files").children) {
    const name = row.querySelector(".file-name").value.trim();
    if (name) files[name] = row.querySelector(".file-content").value;
  }
  return files;
}

function setFiles(files) {
  $("files").replaceChildren();
  for (const [name, content] of Object.entries(files || {})) addFile(name, content);
  countFiles();
}

// ------------------------------------------------------------------- auth

const KEY = "sandbox-run.api-key";
const apiKey = () => $("apikey").value.trim();
function authHeaders() {
  const key = apiKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

async function errorText(resp) {
  let msg = `HTTP ${resp.status}`;
  try {
    const body = await resp.json();
    if (body.error) msg += `: ${body.error}`;
  } catch {}
  return msg;
}

let noticeTimer;
function notice(text, sticky) {
  $("notice").textContent = text;
  $("notice").title = text;
  clearTimeout(noticeTimer);
  if (!sticky) noticeTimer = setTimeout(() => ($("notice").textContent = ""), 3000);
}

// ------------------------------------------------------------------- args

// splitArgs splits a command line as a shell would, without expansions:
// blanks separate, 'single' and "double" quotes group, a backslash escapes
// the next character (in double quotes: only " and \).
function splitArgs(s) {
  const args = [];
  let cur = null;
  let quote = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (quote === "'") {
      if (c === "'") quote = "";
      else cur += c;
    } else if (quote === '"') {
      if (c === '"') quote = "";
      else if (c === "\\" && (s[i + 1] === '"' || s[i + 1] === "\\")) cur += s[++i];
      else cur += c;
    } else if (/\s/.test(c)) {
      if (cur !== null) args.push(cur);
      cur = null;
    } else {
      cur ??= "";
      if (c === "'" || c === '"') quote = c;
      else if (c === "\\" && i + 1 < s.length) cur += s[++i];
      else cur += c;
    }
  }
  if (cur !== null) args.push(cur);
  return args;
}

// ----------------------------------------------------------------- output

const decoder = new TextDecoder();
function chunkText(ev) {
  if (ev.encoding !== "base64") return ev.data;
  const bin = atob(ev.data);
  return decoder.decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

function appendOutput(cls, text) {
  const out = $("output");
  const last = out.lastElementChild;
  if (last && last.className === cls) last.textContent += text;
  else {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    out.append(span);
  }
  out.scrollTop = out.scrollHeight;
}

function setStatus(text, cls) {
  const s = $("status");
  s.textContent = text;
  s.className = `status ${cls}`;
}

// The compiler's output, its error, warning and note lines marked (a line
// that starts with file:line: and says nothing else is an error: Go's).
let compileText = "";
function showCompile(text) {
  compileText = text;
  const pre = $("compile");
  pre.replaceChildren(
    ...text.split(/(?<=\n)/).map((line) => {
      const span = document.createElement("span");
      if (/\bwarning\b/i.test(line)) span.className = "c-warn";
      else if (/\b(note|help)\b:/.test(line)) span.className = "c-note";
      else if (/\berror\b/i.test(line) || /^\S+?:\d+(:\d+)?:\s/.test(line)) span.className = "c-err";
      span.textContent = line;
      return span;
    }),
  );
  $("compile-box").hidden = false;
}

const fmtMs = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
const reason = (r) => r.replace(/_/g, " ");

function showResult(res) {
  const c = res.compile;
  const compileFailed = res.status === "error_compile";
  let label = res.status;
  if (compileFailed) label = "compile error" + (c?.limit_reason ? ` (${reason(c.limit_reason)})` : "");
  else if (res.limit_reason === "canceled") label = "stopped";
  else if (res.limit_reason && res.status !== "completed") label += ` (${reason(res.limit_reason)})`;
  setStatus(label, res.status);
  // A program that did not compile never ran: no run metrics.
  if (!compileFailed) {
    const parts = [`time ${fmtMs(res.duration_ms)}`, `CPU ${fmtMs(res.cpu_time_ms)}`,
      `memory ${res.memory_used_mb.toFixed(1)} MB`, `exit ${res.exit_code}`];
    if (res.signal) parts.push(res.signal);
    $("metrics").textContent = parts.join(" · ");
  }
  if (c) {
    $("compile-status").textContent = `${compileFailed ? "failed" : c.status} · ${fmtMs(c.duration_ms)}${c.cache_hit ? " · cached" : ""}`;
    const text = [c.stdout, c.stderr].filter(Boolean).join("");
    if (!compileText && text && !c.stdout_encoding && !c.stderr_encoding) showCompile(text);
    else if (compileText) showCompile(compileText);
    $("compile-box").hidden = false;
    $("compile-box").open = compileFailed || c.status !== "completed";
    $("compile-box").classList.toggle("failed", compileFailed);
    $("output").closest(".result").classList.toggle("compile-failed", compileFailed);
  }
  if (res.stdout_truncated) appendOutput("note", "\n[stdout truncated]\n");
  if (res.stderr_truncated) appendOutput("note", "\n[stderr truncated]\n");
  if (res.error) appendOutput("stderr", `\n${res.error}\n`);
  if (compileFailed) appendOutput("note", "Not run: the program did not compile (see the compile output).");
  else if (!$("output").textContent) appendOutput("note", "(no output)");
}

// -------------------------------------------------------------------- run

function request() {
  const req = { language: state.lang, code: getCode() };
  const version = $("version").value;
  if (version) req.version = version;
  const args = splitArgs($("args").value);
  if (args.length) req.args = args;
  const stdin = $("stdin").value;
  if (stdin) req.input_data = stdin;
  const files = getFiles();
  if (Object.keys(files).length) req.files = files;
  const timeout = parseFloat($("timeout").value);
  if (timeout > 0) req.timeout_seconds = timeout;
  const memory = parseInt($("memory").value, 10);
  if (memory > 0) req.max_memory_mb = memory;
  return req;
}

// The input line: live while a WebSocket run takes stdin.
function setTerm(live, placeholder) {
  for (const id of ["term-input", "term-send", "term-eof"]) $(id).disabled = !live;
  $("term-input").placeholder = placeholder;
  $("term-input").closest(".term").classList.toggle("live", live);
}
const TERM_IDLE = "A line for the program: Enter sends it";
const TERM_EOF_SENT = "Input ended (EOF sent)";

async function run() {
  if (state.run) {
    state.run.stop();
    return;
  }
  if (!state.lang) return;
  const req = request();
  const btn = $("run");
  btn.textContent = "Stop";
  btn.classList.add("running");
  $("output").replaceChildren();
  $("compile").replaceChildren();
  compileText = "";
  $("compile-box").hidden = true;
  $("compile-box").classList.remove("failed");
  $("output").closest(".result").classList.remove("compile-failed");
  $("compile-status").textContent = "";
  $("metrics").textContent = "";
  setStatus("running…", "running");
  try {
    try {
      await runSocket(req);
    } catch (e) {
      if (!e.noSocket) throw e;
      // The WebSocket did not open, so nothing ran: POST tells why (401,
      // 429, ...) or runs it without interactive input.
      await runStream(req);
    }
  } catch (e) {
    if (e.stopped) setStatus("stopped", "error");
    else {
      setStatus("error", "error");
      appendOutput("stderr", `${e.message}\n`);
    }
  } finally {
    state.run = null;
    btn.textContent = "Run";
    btn.classList.remove("running");
    const focused = document.activeElement === $("term-input");
    setTerm(false, TERM_IDLE);
    if (focused) view.focus();
  }
}

const stopped = () => Object.assign(new Error("stopped"), { stopped: true });

// runSocket runs req over the WebSocket: the input line sends stdin as it
// runs. It fails with noSocket set when the connection does not open.
function runSocket(req) {
  return new Promise((resolve, reject) => {
    const url = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/api/sandbox/ws`;
    const protocols = ["sandbox-run.v1"];
    if (apiKey()) protocols.push(`bearer.${apiKey()}`);
    let ws;
    try {
      ws = new WebSocket(url, protocols); // a key that is no header token throws
    } catch (e) {
      reject(Object.assign(e, { noSocket: true }));
      return;
    }
    let opened = false;
    let ended = false;
    let eofSent = false;
    let killTimer;
    const send = (m) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify(m));
    const finish = (err) => {
      if (ended) return;
      ended = true;
      clearTimeout(killTimer);
      state.run = null;
      if (err) reject(err);
      else resolve();
      if (ws.readyState <= WebSocket.OPEN) ws.close();
    };
    state.run = {
      stop() {
        if (!opened) return finish(stopped());
        send({ type: "kill" });
        setStatus("stopping…", "running");
        // The kill waits behind unread stdin: closing the connection kills too.
        killTimer = setTimeout(() => finish(stopped()), 3000);
      },
      send(line) {
        if (eofSent) return;
        appendOutput("stdin", `${line}\n`);
        send({ type: "stdin", data: `${line}\n` });
      },
      eof() {
        if (eofSent) return;
        eofSent = true;
        send({ type: "eof" });
        setTerm(false, TERM_EOF_SENT);
      },
    };
    ws.onopen = () => {
      opened = true;
      send({ type: "execute", ...req });
      if (req.input_data) {
        // Prefilled input is all of stdin: the program reads its end.
        state.run.eof();
        setTerm(false, "Input ended after the prefilled text (empty it to type input)");
      } else {
        setTerm(true, TERM_IDLE);
        if (document.activeElement === document.body || view.hasFocus || document.activeElement === $("run")) $("term-input").focus();
      }
    };
    ws.onmessage = (m) => {
      let msg;
      try {
        msg = JSON.parse(m.data);
      } catch {
        return;
      }
      switch (msg.type) {
        case "stdout":
        case "stderr":
          appendOutput(msg.type, chunkText(msg));
          break;
        case "compile":
          showCompile(compileText + chunkText(msg));
          break;
        case "result":
          showResult(msg.result);
          finish();
          break;
        case "error":
          if (msg.status === 0) finish(stopped());
          else finish(new Error(msg.status ? `HTTP ${msg.status}: ${msg.error}` : msg.error));
          break;
      }
    };
    ws.onclose = () => {
      if (!opened) finish(Object.assign(new Error("no WebSocket"), { noSocket: true }));
      else finish(killTimer ? stopped() : new Error("the connection closed before the result"));
    };
  });
}

// runStream runs req as POST /api/sandbox/execute with its output streamed
// as Server-Sent Events (no input as it runs).
async function runStream(req) {
  const controller = new AbortController();
  state.run = { stop: () => controller.abort() };
  let done = false;
  try {
    const resp = await fetch("/api/sandbox/execute", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders() },
      body: JSON.stringify(req),
      signal: controller.signal,
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    if (!(resp.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      showResult(await resp.json()); // a server that answered without streaming
      return;
    }
    for await (const { event, data } of events(resp.body)) {
      const payload = JSON.parse(data);
      switch (event) {
        case "stdout":
        case "stderr":
          appendOutput(event, chunkText(payload));
          break;
        case "compile":
          showCompile(compileText + chunkText(payload));
          break;
        case "result":
          showResult(payload);
          done = true;
          break;
        case "error":
          throw new Error(payload.error);
      }
    }
    if (!done) throw new Error("the stream ended before the result");
  } catch (e) {
    throw controller.signal.aborted ? stopped() : e;
  }
}

// events parses a Server-Sent Events body into {event, data}.
async function* events(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n?/g, "\n");
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const j = line.indexOf(":");
        const field = j < 0 ? line : line.slice(0, j);
        const val = j < 0 ? "" : line.slice(j + 1).replace(/^ /, "");
        if (field === "event") event = val;
        else if (field === "data") data.push(val);
      }
      if (data.length) yield { event, data: data.join("\n") };
    }
  }
}

function sendLine() {
  const input = $("term-input");
  if (!state.run?.send || input.disabled) return;
  state.run.send(input.value);
  input.value = "";
}

// -------------------------------------------------------------- permalink
// #z=<base64url of deflate-raw(JSON {l, c, i, f, v, a})>: the language, the
// code, stdin, files, version (when not the default) and args, all in the
// URL's fragment (never sent to the server).

const b64url = (bytes) => {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
};
const unb64url = (s) => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));

async function pipe(bytes, stream) {
  return new Uint8Array(await new Response(new Blob([bytes]).stream().pipeThrough(stream)).arrayBuffer());
}

async function encodeState() {
  const d = currentDraft();
  const s = { l: state.lang, c: d.code };
  if (d.stdin) s.i = d.stdin;
  const files = getFiles();
  if (Object.keys(files).length) s.f = files;
  if (d.version) s.v = d.version;
  if (d.args) s.a = d.args;
  const json = new TextEncoder().encode(JSON.stringify(s));
  return "z=" + b64url(await pipe(json, new CompressionStream("deflate-raw")));
}

async function decodeState(hash) {
  const m = /^#?z=([A-Za-z0-9_-]+)$/.exec(hash);
  if (!m) return null;
  const json = await pipe(unb64url(m[1]), new DecompressionStream("deflate-raw"));
  return JSON.parse(new TextDecoder().decode(json));
}

async function loadFromHash() {
  if (!location.hash) return false;
  try {
    const s = await decodeState(location.hash);
    if (!s) return false;
    const lang = resolveLanguage(s.l);
    if (!lang) {
      notice(`the link's language ${s.l} is not available here`, true);
      return false;
    }
    // What a link shows is not saved as the draft until it is edited.
    state.linked = true;
    selectLanguage(lang, { code: s.c ?? "", version: s.v, stdin: s.i, args: s.a });
    setFiles(s.f);
    return true;
  } catch (e) {
    notice(`could not read the link: ${e.message}`, true);
    return false;
  }
}

async function share() {
  const hash = await encodeState();
  history.replaceState(null, "", `#${hash}`);
  saveDraft();
  state.linked = true;
  try {
    await navigator.clipboard.writeText(location.href);
    notice("link copied");
  } catch {
    notice("link in the address bar");
  }
}

// ------------------------------------------------------------------- init

function defaultLanguage() {
  return resolveLanguage(store.get(LANG)) || resolveLanguage("python") || state.languages[0]?.name;
}

async function init() {
  const key = $("apikey");
  key.value = store.get(KEY) || "";
  key.addEventListener("change", async () => {
    store.set(KEY, key.value.trim());
    const lang = state.lang;
    const d = lang ? currentDraft() : null;
    await loadLanguages();
    if (!state.languages.length) return;
    notice("");
    const again = lang && resolveLanguage(lang);
    if (again) selectLanguage(again, d);
    else if (!(await loadFromHash())) selectLanguage(defaultLanguage());
  });
  $("language").addEventListener("change", (e) => {
    unlink(); // what the link showed is left, unsaved unless edited
    selectLanguage(e.target.value);
    store.set(LANG, state.lang);
  });
  $("version").addEventListener("change", () => (showLimits(), edited()));
  $("example").addEventListener("change", (e) => {
    loadExample(e.target.value);
    e.target.value = "";
  });
  $("stdin").addEventListener("input", edited);
  $("args").addEventListener("input", edited);
  $("run").addEventListener("click", run);
  $("share").addEventListener("click", share);
  $("add-file").addEventListener("click", () => addFile());
  $("term-send").addEventListener("click", sendLine);
  $("term-eof").addEventListener("click", () => state.run?.eof?.());
  $("term-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.isComposing) {
      e.preventDefault();
      sendLine();
    } else if (e.key === "d" && e.ctrlKey) {
      e.preventDefault();
      if ($("term-input").value) sendLine();
      state.run?.eof?.();
    }
  });
  // Ctrl+Enter runs from anywhere (the editor has it in its keymap).
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.defaultPrevented) {
      e.preventDefault();
      run();
    }
  });
  window.addEventListener("hashchange", loadFromHash);
  setTerm(false, TERM_IDLE);

  await loadLanguages();
  if (state.languages.length && !(await loadFromHash())) selectLanguage(defaultLanguage());
  document.body.dataset.ready = "true";
  view.focus();
}

// For tests and the console.
window.playground = { getCode, setCode, run, encodeState, splitArgs };

init();
