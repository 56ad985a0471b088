#!/usr/bin/env bash
# The SDKs install as their READMEs say, for a new user, and work: builds
# the server, starts it on a free loopback port, then
#   python:     a fresh venv (no system site-packages), `pip install
#               ./clients/python` offline (PIP_NO_INDEX=1: nothing from
#               PyPI), a script that runs print(6*7) through sandbox_run
#               and wants 42, then `pip uninstall -y sandbox-run` leaves
#               nothing of it behind;
#   typescript: in a copy of clients/typescript, `npm ci` and
#               `npm pack --pack-destination <project>`; in a fresh npm
#               project, `npm install ./sandbox-run-client-<version>.tgz`,
#               an ESM script that does the same call through
#               @sandbox-run/client, and a .ts file type-checked against
#               the installed declarations.
# Each README is checked to still say the commands run here.
#
#   scripts/sdk-install-check.sh                 both
#   scripts/sdk-install-check.sh python|ts       one of them
#
# SDK_CHECK_PYTHONS (default: python3) lists the interpreters to install
# with, one venv each. Needs Go, root (the server sandboxes), python3 with
# venv (Debian: python3-venv), Node 20+ and npm, and the npm registry (npm ci
# fetches typescript); not PyPI. Everything temporary is removed at exit;
# the server is stopped by its PID. No stdin is read.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH=/usr/local/go/bin:$PATH
export GOWORK=off
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false npm_config_yes=true

mode=${1:-all}
case $mode in all | python | ts) ;; *)
	echo "usage: $0 [python|ts]" >&2
	exit 2
	;;
esac

say() { echo "sdk-install-check: $*"; }
fail() {
	echo "sdk-install-check: FAIL: $*" >&2
	exit 1
}

tmp=$(mktemp -d /tmp/sdk-install-check.XXXXXX)
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
set -E
trap 'echo "sdk-install-check: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR

# run DIR CMD...: prints the command, runs it in DIR (no stdin) with its
# output kept aside, and shows that output when it fails.
run() {
	local dir=$1
	shift
	printf '  [%s]$ %s\n' "${dir/#$tmp/\$tmp}" "$*"
	if ! (cd "$dir" && "$@") >"$tmp/last.log" 2>&1 </dev/null; then
		sed 's/^/  | /' "$tmp/last.log" >&2
		fail "$* (in $dir)"
	fi
}

# readme FILE TEXT: the README still says TEXT (what this script runs).
readme() {
	grep -qF -- "$2" "$1" || fail "$1 no longer says \`$2\`: update it or this script"
}

# 0. What it needs, with what to install when it is missing.
command -v go >/dev/null || fail "go is missing: install Go (go.mod's version) at /usr/local/go"
command -v python3 >/dev/null || fail "python3 is missing (Debian: apt-get install python3 python3-venv)"
if [ "$mode" != python ]; then
	command -v node >/dev/null || fail "node is missing: install Node.js 20 or later (with npm)"
	command -v npm >/dev/null || fail "npm is missing: it comes with Node.js 20 (Debian: apt-get install npm)"
	node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
		fail "node $(node --version) is older than 20: install Node.js 20 or later"
	say "node $(node --version), npm $(npm --version)"
fi

# 1. The server, from the current sources.
say "building the server"
run "$root" go build -o "$tmp/sandbox-run" ./cmd/sandbox-run
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
	fail "no free port"
base=http://127.0.0.1:$port
mkdir "$tmp/data"
"$tmp/sandbox-run" serve --addr "127.0.0.1:$port" --data-dir "$tmp/data" >"$tmp/server.log" 2>&1 </dev/null &
server_pid=$!
ready() {
	python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$base/readyz" 2>/dev/null
}
for _ in $(seq 300); do
	if ! kill -0 "$server_pid" 2>/dev/null; then
		tail -20 "$tmp/server.log" >&2
		fail "the server exited"
	fi
	ready && break
	sleep 0.1
done
ready || {
	tail -20 "$tmp/server.log" >&2
	fail "the server is not ready after 30 s"
}
say "server pid $server_pid on $base"

# 2. Python: a fresh venv, the README's pip install, offline.
check_python() {
	local py=$1 n=$2
	local venv=$tmp/venv$n
	command -v "$py" >/dev/null || fail "$py is missing"
	"$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
		fail "$py is Python $("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])'), older than the SDK's 3.9"
	say "python: $("$py" --version 2>&1) ($(command -v "$py")): a fresh venv, then the README's install"
	printf '  [%s]$ %s\n' "\$tmp" "$py -m venv $venv"
	"$py" -m venv "$venv" >"$tmp/last.log" 2>&1 </dev/null || {
		cat "$tmp/last.log" >&2
		fail "$py -m venv failed: install the venv module with pip (Debian: apt-get install python3-venv)"
	}
	# The venv's pip on PATH, as `pip` is for a user in an activated venv;
	# no index at all, and nothing of the caller's Python environment.
	(
		export PATH=$venv/bin:$PATH VIRTUAL_ENV=$venv PIP_NO_INDEX=1 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
		unset PYTHONPATH PYTHONHOME PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_REQUIRE_VIRTUALENV
		[ "$(command -v pip)" = "$venv/bin/pip" ] || fail "the venv has no pip"
		run "$root" pip install ./clients/python
		run "$root" pip show sandbox-run
		sed -n 's/^\(Name\|Version\|Location\): /  pip show: &/p' "$tmp/last.log"
		cat >"$tmp/smoke.py" <<'EOF'
import os, sys

import sandbox_run
from sandbox_run import Client

where = os.path.realpath(sandbox_run.__file__)
if not where.startswith(os.path.realpath(sys.prefix) + os.sep):
    sys.exit("sandbox_run comes from %s, not the venv %s" % (where, sys.prefix))
result = Client(sys.argv[1]).execute("python", "print(6*7)")
if result.status != "completed" or result.stdout != "42\n":
    sys.exit("execute: unexpected result %r" % (result.raw,))
print("  python: sandbox_run %s from %s: execute python print(6*7): %s, stdout %r"
      % (sandbox_run.__version__, where, result.status, result.stdout))
EOF
		run "$tmp" python "$tmp/smoke.py" "$base"
		cat "$tmp/last.log"
		run "$root" pip uninstall -y sandbox-run
		left=$(find "$venv" -iname '*sandbox_run*' -o -iname '*sandbox-run*' | head -5)
		[ -z "$left" ] || fail "pip uninstall left: $left"
		! python -c 'import sandbox_run' 2>/dev/null || fail "sandbox_run still imports after pip uninstall"
		say "python: pip uninstall -y sandbox-run removed it all"
	)
}

# 3. TypeScript: the README's npm pack, then npm install of the file into a
# fresh project.
check_ts() {
	local src=$tmp/checkout/clients/typescript app=$tmp/your-project
	local version tgz
	version=$(node -p 'require(process.argv[1]).version' "$root/clients/typescript/package.json")
	tgz=sandbox-run-client-$version.tgz
	readme clients/typescript/README.md "npm pack --pack-destination /path/to/your-project"
	readme clients/typescript/README.md "npm install ./$tgz"
	# A copy of the SDK's sources: what npm ci and npm pack write (node_modules,
	# dist) stays out of the checkout.
	mkdir -p "$src" "$app"
	tar -C clients/typescript --exclude=./node_modules --exclude=./dist --exclude='./*.tgz' -cf - . | tar -C "$src" -xf -
	say "typescript: @sandbox-run/client $version, built and packed as the README says (in a copy)"
	run "$src" npm ci
	run "$src" npm pack --pack-destination "$app"
	[ -f "$app/$tgz" ] || fail "npm pack wrote no $tgz to the project (it wrote: $(ls "$app"))"
	say "typescript: $tgz: $(tar -tzf "$app/$tgz" | wc -l) files, $(wc -c <"$app/$tgz") bytes"
	say "typescript: a fresh npm project, then the README's install"
	run "$app" npm init -y
	run "$app" npm install "./$tgz"
	local pkg=$app/node_modules/@sandbox-run/client
	[ -d "$pkg" ] && [ ! -L "$pkg" ] || fail "node_modules/@sandbox-run/client is not an installed copy"
	for f in package.json dist/index.js dist/index.d.ts; do
		[ -f "$pkg/$f" ] || fail "the installed package has no $f"
	done
	cat >"$app/smoke.mjs" <<'EOF'
import { Client } from "@sandbox-run/client";

// Node 20.6+ (and 22) resolve without a flag.
const where = typeof import.meta.resolve === "function" ? import.meta.resolve("@sandbox-run/client") : "node_modules";
const client = new Client({ baseUrl: process.argv[2] });
const result = await client.execute({ language: "python", code: "print(6*7)" });
if (result.status !== "completed" || result.stdout !== "42\n") {
  console.error("execute: unexpected result", JSON.stringify(result));
  process.exit(1);
}
console.log(`  typescript: @sandbox-run/client from ${where}: execute python print(6*7): ${result.status}, stdout ${JSON.stringify(result.stdout)}`);
EOF
	run "$app" node smoke.mjs "$base"
	cat "$tmp/last.log"
	# The declarations resolve for a TypeScript user (tsc from the SDK copy's
	# node_modules: the project itself installed only the client).
	cat >"$app/types.mts" <<'EOF'
import { Client, SandboxRunError, type Result } from "@sandbox-run/client";

const client: Client = new Client({ baseUrl: "http://127.0.0.1:8080" });
const result: Result = await client.execute({ language: "python", code: "print(6*7)" });
const out: string = result.stdout;
export { out, SandboxRunError };
EOF
	run "$app" "$src/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
		--target es2022 --lib es2022,dom types.mts
	say "typescript: types.mts type-checks against the installed declarations (tsc --strict)"
}

if [ "$mode" != ts ]; then
	readme clients/python/README.md "pip install ./clients/python"
	n=0
	for py in ${SDK_CHECK_PYTHONS:-python3}; do
		n=$((n + 1))
		check_python "$py" "$n"
	done
fi
if [ "$mode" != python ]; then
	check_ts
fi
say "OK"
