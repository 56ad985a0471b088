#!/usr/bin/env bash
# The README's test command: on a fresh Debian 12 machine (root, Go at
# /usr/local/go) install the toolchains the tests need (the core eight
# languages, from Debian's packages: scripts/install-languages.sh --core;
# only what is missing) and gVisor's runsc (scripts/install-gvisor.sh, from
# the Go module proxy, when missing), then run every Go test.
#
#   bash scripts/test.sh                       go test -count=1 ./...
#   bash scripts/test.sh -run TestX ./pkg/api  go test -count=1 -run TestX ./pkg/api
#
# Arguments go to go test; without any, ./... is tested.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { echo "test.sh: Go is missing: install Go 1.26 at /usr/local/go" >&2; exit 1; }
bash scripts/install-languages.sh --core
bash scripts/install-gvisor.sh >/dev/null
if [ $# -eq 0 ]; then
	set -- ./...
fi
exec go test -count=1 "$@"
