// Builds the playground into ../../pkg/api/playground/dist: index.html and
// content-hashed, minified assets (the Go binary embeds that directory).
import * as esbuild from "esbuild";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "../../pkg/api/playground/dist");
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: join(here, "src/main.js"), style: join(here, "src/style.css") },
  bundle: true,
  splitting: true, // each language's support is a chunk loaded when chosen
  format: "esm",
  minify: true,
  target: ["chrome105", "firefox113", "safari16.4"],
  outdir: join(out, "assets"),
  entryNames: "[name]-[hash]",
  chunkNames: "[name]-[hash]",
  legalComments: "linked",
  metafile: true,
  logLevel: "info",
});

const entry = (name) =>
  basename(Object.entries(result.metafile.outputs).find(([, o]) => o.entryPoint?.endsWith(name))[0]);
const html = readFileSync(join(here, "src/index.html"), "utf8")
  .replace("{{JS}}", `/playground/assets/${entry("src/main.js")}`)
  .replace("{{CSS}}", `/playground/assets/${entry("src/style.css")}`);
writeFileSync(join(out, "index.html"), html);
