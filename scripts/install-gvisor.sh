#!/usr/bin/env bash
# Builds gVisor's runsc at the gVisor version go.mod pins (the module
# gvisor.dev/gvisor, whose netstack pkg/egress already uses), from the Go
# module proxy, with CGO_ENABLED=0, and puts it in a fixed place. Only when
# missing: a runsc of that version already there (its version is stored beside
# it) is kept, and running it again changes nothing. Debian 12, as root, Go at
# /usr/local/go.
#
#   bash scripts/install-gvisor.sh           build runsc unless it is there
#   bash scripts/install-gvisor.sh --check   only say whether it is there
#                                            (exit 0) or not (exit 1)
#   bash scripts/install-gvisor.sh --force   build it even when it is there
#   bash scripts/install-gvisor.sh --dir D   install into D instead
#
# Where: $SANDBOX_RUN_GVISOR_DIR, or /usr/local/lib/sandbox-run by default:
# DIR/runsc, and DIR/runsc.version holding "gvisor.dev/gvisor@VERSION";
# /usr/local/bin/runsc links to it unless another runsc is there.
# stdout gets one line, the path of runsc (runsc=$(bash scripts/install-gvisor.sh));
# every other message goes to stderr. Exit 0: runsc is there at go.mod's
# version; 1: it is not (or the build failed); 2: usage.
#
# Network: only the Go module proxy (GOPROXY without its "direct" fallback;
# the checksum database is reached through the proxy too). The Go toolchain is
# the local one (GOTOOLCHAIN=local): no other toolchain is downloaded. On
# the 2-core dev machine the build took 2 min (modules cached), 4 min from an
# empty build cache, 10 s when only the link was left; runsc is ~80 MB.
set -euo pipefail

readonly PROG=install-gvisor.sh
readonly MODULE=gvisor.dev/gvisor
readonly PKG=gvisor.dev/gvisor/runsc

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() {
	sed -n '/^#   bash/,/^# version; 1/s/^# \{0,1\}//p' "$0" >&2
}

dir=${SANDBOX_RUN_GVISOR_DIR:-/usr/local/lib/sandbox-run}
mode=install
while [ $# -gt 0 ]; do
	case $1 in
	--check) mode=check ;;
	--force) mode=force ;;
	--dir)
		[ $# -ge 2 ] || { log "--dir needs a directory"; usage; exit 2; }
		dir=$2
		shift
		;;
	--dir=*) dir=${1#--dir=} ;;
	-h | --help) usage; exit 0 ;;
	*) log "unknown argument: $1"; usage; exit 2 ;;
	esac
	shift
done
[ -n "$dir" ] || { log "the directory is empty"; exit 2; }
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac

cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || die "Go is missing: install Go 1.26 at /usr/local/go"
[ "$(uname -s)" = Linux ] || die "runsc runs on Linux only (this is $(uname -s))"
case $(uname -m) in
x86_64 | aarch64) ;;
*) die "gVisor supports amd64 and arm64 only (this is $(uname -m))" ;;
esac

# The Go module proxy and nothing else: drop "direct" (and "off") from
# GOPROXY, whatever the environment or `go env -w` set it to.
proxy=
IFS=',|' read -r -a entries <<<"$(go env GOPROXY)"
for e in "${entries[@]}"; do
	case $e in '' | direct | off) ;; *) proxy=${proxy:+$proxy,}$e ;; esac
done
[ -n "$proxy" ] || die "GOPROXY ($(go env GOPROXY)) names no module proxy"
export GOPROXY=$proxy GOTOOLCHAIN=local GOFLAGS=-mod=readonly

# The version the project builds with (go.mod's, after minimal version
# selection; a replace of the module is refused: runsc must come from the
# proxy at a released pseudo-version).
replace=$(go list -m -f '{{with .Replace}}{{.Path}}@{{.Version}}{{end}}' "$MODULE") ||
	die "cannot read $MODULE from go.mod (go list -m $MODULE failed)"
[ -z "$replace" ] || die "go.mod replaces $MODULE with $replace: build runsc from that by hand"
version=$(go list -m -f '{{.Version}}' "$MODULE")
case $version in
v[0-9]*) ;;
*) die "go.mod gives no version for $MODULE (got '$version')" ;;
esac
want="$MODULE@$version"
runsc=$dir/runsc
stamp=$dir/runsc.version

# runsc on PATH as well (/usr/local/bin/runsc, a link to it), unless another
# runsc is there: what finds runsc on PATH finds this one.
link() {
	local bin=/usr/local/bin/runsc
	if [ -L "$bin" ] || [ ! -e "$bin" ]; then
		ln -sfn -- "$runsc" "$bin" 2>/dev/null || log "could not link $bin to $runsc"
	fi
}

installed() {
	[ -x "$runsc" ] && [ -f "$stamp" ] && [ "$(cat -- "$stamp")" = "$want" ] &&
		"$runsc" --version >/dev/null 2>&1
}

if [ "$mode" = check ]; then
	if installed; then
		log "runsc $version is installed"
		echo "$runsc"
		exit 0
	fi
	if [ -f "$stamp" ]; then
		log "runsc in $dir is $(cat -- "$stamp"), not $want"
	else
		log "runsc $version is not installed in $dir"
	fi
	exit 1
fi
if [ "$mode" = install ] && installed; then
	log "runsc $version is already installed"
	link
	echo "$runsc"
	exit 0
fi

mkdir -p -- "$dir" 2>/dev/null || die "cannot create $dir (run as root, or pass --dir)"
[ -w "$dir" ] || die "cannot write to $dir (run as root, or pass --dir)"

# One build at a time: a second caller waits, then finds runsc there.
exec 9>"$dir/.install-gvisor.lock"
flock 9
if [ "$mode" = install ] && installed; then
	log "runsc $version was installed meanwhile"
	link
	echo "$runsc"
	exit 0
fi

# The runsc main package must exist in the module at that version.
log "fetching $want through $GOPROXY"
go mod download "$MODULE" || die "go mod download $MODULE failed"
src=$(go list -m -f '{{.Dir}}' "$MODULE")
if [ -z "$src" ] || [ ! -f "$src/runsc/main.go" ]; then
	die "$want has no runsc/main.go (in '${src:-?}'): the module holds no runsc at this version"
fi

tmp=$(mktemp -d -- "$dir/.build.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
start=$(date +%s)
log "building $PKG@$version (CGO_ENABLED=0; a few minutes)"
# go install PKG@VERSION builds with gVisor's own go.mod (its dependency
# versions, not this project's), outside this module. runsc's version string
# is set, as Bazel's build would.
if ! (cd "$tmp" && GOBIN=$tmp CGO_ENABLED=0 go install -trimpath \
	-ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$version" \
	"$PKG@$version"); then
	die "go install $PKG@$version failed"
fi
[ -x "$tmp/runsc" ] || die "go install left no runsc binary"
got=$("$tmp/runsc" --version 2>&1) || die "the new runsc does not run: $got"
# Binary first, stamp last: an interrupted install is never taken for done.
rm -f -- "$stamp"
mv -f -- "$tmp/runsc" "$runsc"
printf '%s\n' "$want" >"$stamp.tmp"
mv -f -- "$stamp.tmp" "$stamp"
log "installed runsc $version in $(($(date +%s) - start)) s: $(head -n 1 <<<"$got")"
link
echo "$runsc"
