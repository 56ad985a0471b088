// The sandbox-run playground: a CodeMirror editor, a language picker filled
// from GET /api/sandbox/languages, and runs streamed from
// POST /api/sandbox/execute (Accept: text/event-stream).
import { EditorState, Compartment } from "@codemirror/state";
import {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter,
  highlightSpecialChars, drawSelection, rectangularSelection, crosshairCursor,
} from "@codemirror/view";
import { defaultKeymap, history as undoHistory, historyKeymap, indentWithTab } from "@codemirror/commands";
import {
  syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching,
  foldGutter, foldKeymap, StreamLanguage,
} from "@codemirror/language";
import { closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";

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

const samples = {
  python: 'name = input("")\nprint(f"Hello, {name}!")\n',
  javascript: 'const name = require("fs").readFileSync(0, "utf8").trim();\nconsole.log(`Hello, ${name}!`);\n',
  go: 'package main\n\nimport (\n\t"bufio"\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n\tname, _ := bufio.NewReader(os.Stdin).ReadString(\'\\n\')\n\tfmt.Printf("Hello, %s!\\n", name[:len(name)-1])\n}\n',
  rust: 'use std::io::stdin;\n\nfn main() {\n    let mut name = String::new();\n    stdin().read_line(&mut name).unwrap();\n    println!("Hello, {}!", name.trim());\n}\n',
  java: 'import java.util.Scanner;\n\npublic class Main {\n    public static void main(String[] args) {\n        String name = new Scanner(System.in).nextLine();\n        System.out.println("Hello, " + name + "!");\n    }\n}\n',
  bash: 'read -r name\necho "Hello, $name!"\n',
  c: '#include <stdio.h>\n\nint main(void) {\n    char name[100];\n    if (scanf("%99s", name) == 1)\n        printf("Hello, %s!\\n", name);\n    return 0;\n}\n',
  cpp: '#include <iostream>\n#include <string>\n\nint main() {\n    std::string name;\n    std::getline(std::cin, name);\n    std::cout << "Hello, " << name << "!" << std::endl;\n}\n',
  perl: 'my $name = <STDIN>;\nchomp $name;\nprint "Hello, $name!\\n";\n',
  tcl: 'gets stdin name\nputs "Hello, $name!"\n',
  ruby: 'name = gets.chomp\nputs "Hello, #{name}!"\n',
  lua: 'local name = io.read()\nprint("Hello, " .. name .. "!")\n',
};

const state = {
  languages: [], // from the API
  lang: "",
  drafts: {}, // language → code, while the page is open
  controller: null, // the running execution's AbortController
};

// ---------------------------------------------------------------- editor

// The server's CSP allows the editor's generated styles by this nonce.
const nonce = document.querySelector('meta[name="csp-nonce"]')?.content || "";
const langConf = new Compartment();
const view = new EditorView({
  parent: $("editor"),
  state: EditorState.create({
    doc: "",
    extensions: [
      lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), undoHistory(), foldGutter(),
      drawSelection(), EditorState.allowMultipleSelections.of(true), indentOnInput(),
      syntaxHighlighting(defaultHighlightStyle, { fallback: true }), bracketMatching(), closeBrackets(),
      rectangularSelection(), crosshairCursor(), highlightActiveLine(), highlightSelectionMatches(),
      keymap.of([
        { key: "Mod-Enter", run: () => (run(), true) },
        ...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap, indentWithTab,
      ]),
      langConf.of([]),
      EditorView.cspNonce.of(nonce),
    ],
  }),
});

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

// -------------------------------------------------------------- languages

function selectLanguage(lang, code) {
  if (lang === state.lang && code === undefined) code = getCode();
  if (state.lang && state.lang !== lang) state.drafts[state.lang] = getCode();
  state.lang = lang;
  $("language").value = lang;
  setCode(code ?? state.drafts[lang] ?? samples[lang] ?? "");
  setMode(lang);
  const info = state.languages.find((l) => l.name === lang);
  const d = info?.default_limits || {};
  $("timeout").placeholder = d.timeout_seconds ?? "";
  $("memory").placeholder = d.memory_mb ?? "";
}

function resolveLanguage(name) {
  const n = (name || "").toLowerCase();
  const l = state.languages.find((l) => l.name === n || l.aliases.includes(n));
  return l?.name;
}

async function loadLanguages() {
  const sel = $("language");
  try {
    const resp = await fetch("/api/sandbox/languages", { headers: authHeaders() });
    if (!resp.ok) throw new Error(await errorText(resp));
    state.languages = await resp.json();
  } catch (e) {
    state.languages = [];
    notice(`languages: ${e.message}`, true);
  }
  sel.replaceChildren(
    ...state.languages.map((l) => {
      const o = document.createElement("option");
      o.value = l.name;
      o.textContent = `${l.name} ${l.version}`.trim();
      return o;
    }),
  );
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
function authHeaders() {
  const key = $("apikey").value.trim();
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
  clearTimeout(noticeTimer);
  if (!sticky) noticeTimer = setTimeout(() => ($("notice").textContent = ""), 3000);
}

// -------------------------------------------------------------------- run

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

const fmtMs = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

function showResult(res) {
  let label = res.status;
  if (res.limit_reason && res.status !== "completed") label += ` (${res.limit_reason.replace("_", " ")})`;
  setStatus(label, res.status);
  const parts = [`time ${fmtMs(res.duration_ms)}`, `CPU ${fmtMs(res.cpu_time_ms)}`,
    `memory ${res.memory_used_mb.toFixed(1)} MB`, `exit ${res.exit_code}`];
  if (res.signal) parts.push(res.signal);
  $("metrics").textContent = parts.join(" · ");
  if (res.compile) {
    const c = res.compile;
    $("compile-box").hidden = false;
    $("compile-status").textContent = `${c.status}, ${fmtMs(c.duration_ms)}${c.cache_hit ? ", cached" : ""}`;
    if (c.status !== "completed") $("compile-box").open = true;
    const text = [c.stdout, c.stderr].filter(Boolean).join("");
    if (!$("compile").textContent && text && !c.stdout_encoding && !c.stderr_encoding) $("compile").textContent = text;
  }
  if (res.stdout_truncated) appendOutput("note", "\n[stdout truncated]\n");
  if (res.stderr_truncated) appendOutput("note", "\n[stderr truncated]\n");
  if (res.error) appendOutput("stderr", `\n${res.error}\n`);
  if (!$("output").textContent) appendOutput("note", "(no output)");
}

function request() {
  const req = { language: state.lang, code: getCode() };
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

async function run() {
  if (state.controller) {
    state.controller.abort();
    return;
  }
  if (!state.lang) return;
  const controller = (state.controller = new AbortController());
  const btn = $("run");
  btn.textContent = "Stop";
  btn.classList.add("running");
  $("output").replaceChildren();
  $("compile").textContent = "";
  $("compile-box").hidden = true;
  $("compile-status").textContent = "";
  $("metrics").textContent = "";
  setStatus("running…", "running");
  let done = false;
  try {
    const resp = await fetch("/api/sandbox/execute", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders() },
      body: JSON.stringify(request()),
      signal: controller.signal,
    });
    if (!resp.ok) throw new Error(await errorText(resp));
    if (!(resp.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      showResult(await resp.json()); // a server that answered without streaming
      done = true;
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
          $("compile-box").hidden = false;
          $("compile").textContent += chunkText(payload);
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
    if (controller.signal.aborted) setStatus("stopped", "error");
    else {
      setStatus("error", "error");
      appendOutput("stderr", `${e.message}\n`);
    }
  } finally {
    state.controller = null;
    btn.textContent = "Run";
    btn.classList.remove("running");
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

// -------------------------------------------------------------- permalink
// #z=<base64url of deflate-raw(JSON {l, c, i, f})>: the language, the code,
// stdin and files, all in the URL's fragment (never sent to the server).

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
  const s = { l: state.lang, c: getCode() };
  if ($("stdin").value) s.i = $("stdin").value;
  const files = getFiles();
  if (Object.keys(files).length) s.f = files;
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
    state.drafts = {};
    state.lang = "";
    selectLanguage(lang, s.c ?? "");
    $("stdin").value = s.i ?? "";
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
  try {
    await navigator.clipboard.writeText(location.href);
    notice("link copied");
  } catch {
    notice("link in the address bar");
  }
}

// ------------------------------------------------------------------- init

async function init() {
  const key = $("apikey");
  try {
    key.value = localStorage.getItem(KEY) || "";
  } catch {}
  key.addEventListener("change", async () => {
    try {
      localStorage.setItem(KEY, key.value.trim());
    } catch {}
    const lang = state.lang;
    await loadLanguages();
    if (!state.languages.length) return;
    notice("");
    if (lang) selectLanguage(resolveLanguage(lang) || defaultLanguage(), getCode());
    else if (!(await loadFromHash())) selectLanguage(defaultLanguage());
  });
  $("language").addEventListener("change", (e) => selectLanguage(e.target.value));
  $("run").addEventListener("click", run);
  $("share").addEventListener("click", share);
  $("add-file").addEventListener("click", () => addFile());
  window.addEventListener("hashchange", loadFromHash);

  await loadLanguages();
  if (state.languages.length && !(await loadFromHash())) selectLanguage(defaultLanguage());
  document.body.dataset.ready = "true";
  view.focus();
}

function defaultLanguage() {
  return resolveLanguage("python") || state.languages[0]?.name;
}

// For tests and the console.
window.playground = { getCode, setCode, run, encodeState };

init();
