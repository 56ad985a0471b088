#!/usr/bin/env bash
# Client generators take the OpenAPI document as it is served: starts
# bin/sandbox-run serve on a free loopback port, fetches /api/openapi.json,
# then
#   go:  generates a Go client with oapi-codegen (types,client), builds a
#        program that runs python print(42) through the generated
#        ClientWithResponses (typed request body, typed JSON200 result) and
#        lists the languages, and runs it;
#   ts:  generates TypeScript types with openapi-typescript, compiles a
#        program that makes the same call with fetch and the generated
#        `paths` types (tsc --strict), and runs it with node.
#
#   scripts/openapi-clients.sh           both
#   scripts/openapi-clients.sh go|ts     one of them
#
# Needs the Go proxy and the npm registry (go run ...@version, npx), and
# root (the server sandboxes). bin/sandbox-run is built when missing or
# older than the sources. Everything temporary is removed at exit; the
# server is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export GOWORK=off

OAPI_CODEGEN=github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2
OPENAPI_TYPESCRIPT=openapi-typescript@7.13.0
TYPESCRIPT=typescript@5.6.3
mode=${1:-all}
case $mode in all | go | ts) ;; *)
	echo "usage: $0 [go|ts]" >&2
	exit 2
	;;
esac

tmp=$(mktemp -d /tmp/openapi-clients.XXXXXX)
server_pid=
cleanup() {
	local rc=$?
	if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	echo "openapi-clients: FAIL: $*" >&2
	exit 1
}
step() { echo "openapi-clients: $*"; }

# 1. The server, from current sources.
if [ ! -x bin/sandbox-run ] || [ -n "$(find cmd pkg internal go.mod go.sum -newer bin/sandbox-run -print -quit 2>/dev/null)" ]; then
	step "building bin/sandbox-run"
	mkdir -p bin
	go build -o bin/sandbox-run ./cmd/sandbox-run || fail "go build ./cmd/sandbox-run"
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
	fail "no free port"
base=http://127.0.0.1:$port
mkdir "$tmp/data"
bin/sandbox-run serve --addr "127.0.0.1:$port" --data-dir "$tmp/data" >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
	if ! kill -0 "$server_pid" 2>/dev/null; then
		tail -20 "$tmp/server.log" >&2
		fail "the server exited"
	fi
	curl -fsS -o /dev/null "$base/readyz" 2>/dev/null && break
	sleep 0.1
done
curl -fsS -o /dev/null "$base/readyz" || { tail -20 "$tmp/server.log" >&2; fail "the server is not ready after 30 s"; }
step "server pid $server_pid on $base"

curl -fsS -o "$tmp/openapi.json" "$base/api/openapi.json" || fail "GET /api/openapi.json"
cmp -s "$tmp/openapi.json" pkg/api/openapi.json ||
	fail "bin/sandbox-run serves another document than pkg/api/openapi.json (stale binary? remove bin/sandbox-run)"
step "GET /api/openapi.json: $(wc -c <"$tmp/openapi.json") bytes"

# 2. Go: oapi-codegen's client, as generated.
run_go() {
	local d=$tmp/go
	mkdir -p "$d/c" "$d/cmd"
	cp "$tmp/openapi.json" "$d/"
	(cd "$d" && go mod init example.com/oapiclient >/dev/null 2>&1) || fail "go mod init"
	step "go: generating the client with $OAPI_CODEGEN"
	(cd "$d" && go run "$OAPI_CODEGEN" -generate types,client -package c openapi.json >c/c.go 2>"$d/gen.err") ||
		{ cat "$d/gen.err" >&2; fail "oapi-codegen refused the document"; }
	step "go: c/c.go: $(wc -l <"$d/c/c.go") lines"
	cat >"$d/cmd/main.go" <<'EOF'
// One real call through oapi-codegen's ClientWithResponses: the typed
// request body in, the typed JSON200 result out.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"example.com/oapiclient/c"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := c.NewClientWithResponses(os.Args[1])
	check(err)

	langs, err := cl.LanguagesWithResponse(ctx)
	check(err)
	if langs.JSON200 == nil {
		fail("GET /api/sandbox/languages: %s: %s", langs.Status(), langs.Body)
	}
	python := false
	for _, l := range *langs.JSON200 {
		python = python || l.Name == "python"
	}
	if !python {
		fail("GET /api/sandbox/languages: no python in %s", langs.Body)
	}

	var code c.ExecuteRequest_Code
	check(code.FromExecuteRequestCode0("print(42)"))
	res, err := cl.ExecuteCodeWithResponse(ctx, c.ExecuteCodeJSONRequestBody{Language: "python", Code: code})
	check(err)
	if res.JSON200 == nil {
		fail("POST /api/sandbox/execute: %s: %s", res.Status(), res.Body)
	}
	r := *res.JSON200 // a c.ExecuteResponse
	if r.Status != c.ExecuteResponseStatusCompleted || r.Stdout != "42\n" {
		fail("POST /api/sandbox/execute: unexpected result %s", res.Body)
	}
	fmt.Printf("go: GET /api/sandbox/languages: %d languages; POST /api/sandbox/execute: status %s, stdout %q, execution_id %s\n",
		len(*langs.JSON200), r.Status, r.Stdout, r.ExecutionId)
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "go client: "+format+"\n", a...)
	os.Exit(1)
}
EOF
	(cd "$d" && go mod tidy >"$d/tidy.log" 2>&1) || { cat "$d/tidy.log" >&2; fail "go mod tidy"; }
	(cd "$d" && go build -o client ./cmd) || fail "the generated Go client does not compile"
	"$d/client" "$base" || fail "the generated Go client's call failed"
}

# 3. TypeScript: openapi-typescript's types, tsc --strict, node.
run_ts() {
	local d=$tmp/ts
	mkdir -p "$d"
	cp "$tmp/openapi.json" "$d/"
	echo '{"private": true, "type": "module"}' >"$d/package.json"
	step "ts: generating types with $OPENAPI_TYPESCRIPT"
	(cd "$d" && npx --yes "$OPENAPI_TYPESCRIPT" openapi.json -o schema.d.ts >"$d/gen.log" 2>&1) ||
		{ cat "$d/gen.log" >&2; fail "openapi-typescript refused the document"; }
	cat >"$d/main.ts" <<'EOF'
// One real call with fetch, typed by openapi-typescript's `paths`.
import type { paths } from "./schema.js";

declare const process: { argv: string[]; exit(code: number): never };

type Execute = paths["/api/sandbox/execute"]["post"];
type ExecuteBody = Execute["requestBody"]["content"]["application/json"];
type ExecuteResult = Execute["responses"][200]["content"]["application/json"];
type ExecuteError = Execute["responses"][400]["content"]["application/json"];

function fail(msg: string): never {
  console.error("ts client: " + msg);
  process.exit(1);
}

const body: ExecuteBody = { language: "python", code: "print(42)" };
const resp = await fetch(new URL("/api/sandbox/execute", process.argv[2]), {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "application/json" },
  body: JSON.stringify(body),
});
if (resp.status !== 200) {
  const e = (await resp.json()) as ExecuteError;
  fail(`POST /api/sandbox/execute: ${resp.status}: ${e.error}`);
}
const result = (await resp.json()) as ExecuteResult;
const status: ExecuteResult["status"] = result.status;
const stdout: string = result.stdout;
if (status !== "completed" || stdout !== "42\n") {
  fail(`POST /api/sandbox/execute: unexpected result ${JSON.stringify(result)}`);
}
console.log(`ts: POST /api/sandbox/execute: status ${status}, stdout ${JSON.stringify(stdout)}, execution_id ${result.execution_id}`);
EOF
	step "ts: compiling with $TYPESCRIPT (tsc --strict)"
	(cd "$d" && npx --yes -p "$TYPESCRIPT" tsc --strict --noEmit false --module nodenext --moduleResolution nodenext \
		--target es2022 --lib es2022,dom --outDir out main.ts) ||
		fail "the program on openapi-typescript's types does not compile"
	node "$d/out/main.js" "$base" || fail "the TypeScript client's call failed"
}

case $mode in
all)
	run_go
	run_ts
	;;
go) run_go ;;
ts) run_ts ;;
esac
step "OK"
