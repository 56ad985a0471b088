#!/usr/bin/env bash
# Checks that the committed playground build (pkg/api/playground/dist, which
# `go build` embeds) is what web/playground/src builds to: it rebuilds a copy
# of web/playground (npm ci, then build.mjs) in a temporary directory, never
# in the tree, and compares the two builds file by file. esbuild names each
# asset by a content hash that also varies with where and how it was built,
# so names are compared without their hash: the same files, the same bytes.
# Needs Node.js and npm. Exit 1 with the differences when they disagree:
# run web/playground/build.sh and commit its output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/web" "$tmp/pkg/api/playground"
cp -r "$root/web/playground" "$tmp/web/"
rm -rf "$tmp/web/playground/node_modules"
(cd "$tmp/web/playground" && npm ci --no-audit --no-fund --loglevel=error >/dev/null && node build.mjs >/dev/null 2>&1)

# One line per file: its name without the hash, and the digest of its bytes
# with every asset name's hash taken out.
digest() {
	(cd "$1" && find . -type f | sort | while read -r f; do
		printf '%s %s\n' "$(sed -E 's/-[A-Z0-9]{8}\.(js|css|txt)$/-HASH.\1/' <<<"$f")" \
			"$(sed -E 's/-[A-Z0-9]{8}\.(js|css|txt)/-HASH.\1/g' "$f" | sha256sum | cut -c1-16)"
	done | sort)
}
if ! diff <(digest "$root/pkg/api/playground/dist") <(digest "$tmp/pkg/api/playground/dist") >"$tmp/diff"; then
	echo "pkg/api/playground/dist is not what web/playground builds to (< committed, > rebuilt):" >&2
	cat "$tmp/diff" >&2
	echo "run web/playground/build.sh and commit pkg/api/playground/dist" >&2
	exit 1
fi
echo "playground: pkg/api/playground/dist is web/playground's build ($(find "$root/pkg/api/playground/dist" -type f | wc -l) files)"
