#!/usr/bin/env bash
# Run the real sandbox-run binary end to end in the throwaway VM of
# scripts/cgroupv2-vm: build sandbox-run and the driver test/vm (both static),
# bring the core toolchains into the VM (bash, python3, gcc, node) and boot
# it with the driver as its one workload. The driver checks the CLI in each
# language (exact output and exit status, a compile step, the limits) and
# the server (concurrent executions, limits, streaming, /metrics, /readyz,
# a graceful exit on SIGTERM), and that nothing (process, cgroup, mount) is
# left behind. See test/vm/main.go.
#
#   scripts/vm-check.sh                    # CGV2_LAYOUT=v2 (default): pure cgroup v2
#   CGV2_LAYOUT=v1 scripts/vm-check.sh     # cgroup v1 hierarchies, as systemd mounts them
#   CGV2_LAYOUT=hybrid scripts/vm-check.sh # v1 plus an empty cgroup2 (systemd's hybrid)
#
# The exit status is the driver's: 0 when every check passed, 1 when one
# failed, 125 when the VM did not report (boot failure, timeout), 2 for a
# usage error. The VM's console is printed and kept in
# $VMCHECK_OUT/vm-$CGV2_LAYOUT.log.
#
# Environment (besides run.sh's CGV2_* knobs, passed through):
#   CGV2_LAYOUT          v2 (default), v1 or hybrid (the engine must use cgroup
#                        v2 on v2, v1 on the others)
#   CGV2_CGROUP          the cgroup the driver (and so sandbox-run) starts in,
#                        like a systemd unit with Delegate=yes (default
#                        /test.slice/sandbox-run.service; empty: the root)
#   VMCHECK_LANGUAGES    comma-separated subset of bash,python,c,javascript
#                        (default: all four, each required on the host)
#   VMCHECK_CONCURRENCY  requests sent to the server at once (default 8)
#   VMCHECK_OUT          build and log directory (default bin/vm-check)
#   VMCHECK_SANDBOX_RUN  test this sandbox-run binary instead of building one
#                        (a dynamic one brings its libraries along)
#   VMCHECK_MEM          guest memory in MiB (default 2048: the toolchains
#                        live in the initramfs, about 300 MB)
#   VMCHECK_CPUS         guest vCPUs (default 2)
#   VMCHECK_TIMEOUT      host-side timeout of the VM run in seconds (default 900)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

readonly PROG=${0##*/}
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit 2; }

layout=${CGV2_LAYOUT:-v2}
case $layout in
v1 | v2 | hybrid) ;;
*) die "CGV2_LAYOUT=$layout: want v2, v1 or hybrid" ;;
esac
if [[ $layout != v2 ]] && ! grep -q CGV2_LAYOUT scripts/cgroupv2-vm/run.sh; then
	die "scripts/cgroupv2-vm/run.sh does not support CGV2_LAYOUT yet: it can only boot the v2 layout"
fi
export CGV2_LAYOUT=$layout

out=${VMCHECK_OUT:-bin/vm-check}
out=$(realpath -m -- "$out")
[[ $out != *' '* ]] || die "VMCHECK_OUT must have no spaces (CGV2_EXTRA is space-separated): $out"
mkdir -p -- "$out"
logdir=$out
langs=${VMCHECK_LANGUAGES:-bash,python,c,javascript}
tmp=$(mktemp -d -- "${TMPDIR:-/tmp}/vm-check.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
case $out/ in
/tmp/* | /run/* | /dev/* | /proc/* | /sys/*)
	# The VM mounts its own filesystems there, hiding what was copied in at
	# that path (a clone under /tmp): the binaries go to /var/tmp instead,
	# the log stays in $logdir.
	out=$(mktemp -d -- /var/tmp/vm-check-bin.XXXXXX)
	trap 'rm -rf -- "$tmp" "$out"' EXIT
	log "binaries in $out (the VM hides $logdir)"
	;;
esac

# ---------------------------------------------------------------- build
bin=$out/sandbox-run
if [[ -n ${VMCHECK_SANDBOX_RUN:-} ]]; then
	[[ -f $VMCHECK_SANDBOX_RUN && -x $VMCHECK_SANDBOX_RUN ]] || die "VMCHECK_SANDBOX_RUN=$VMCHECK_SANDBOX_RUN is not an executable file"
	log "building the driver (static) into $out; testing $VMCHECK_SANDBOX_RUN"
	[[ $VMCHECK_SANDBOX_RUN -ef $bin ]] || cp -f -- "$VMCHECK_SANDBOX_RUN" "$bin"
else
	log "building sandbox-run and the driver (static) into $out"
	CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/sandbox-run
fi
CGO_ENABLED=0 go build -trimpath -o "$out/vm-check" ./test/vm

# ---------------------------------------------------------------- toolchains
# Each file is copied into the VM at its host path; ELF executables bring
# their shared libraries (run.sh does that).
extra=("$bin")

need() { [[ -x $1 ]] || die "$2 needs $1 on this host (or leave $2 out of VMCHECK_LANGUAGES)"; }

# gcc_files: what gcc opens to compile and link a C program the way the c
# language entry does (-O2 -std=gnu17 -Wall ... -lm): the driver and its
# programs (cc1, collect2, the LTO plugin), the headers (gcc -H), the start
# files and libraries (ld -t), from gcc's own verbose report.
gcc_files() {
	cat >"$tmp/probe.c" <<'C'
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(void) { printf("%f\n", sqrt(2.0)); return 0; }
C
	(cd "$tmp" && gcc -v -H -O2 -std=gnu17 -Wall -o probe probe.c -lm -Wl,-t) >"$tmp/gcc.log" 2>&1 ||
		{ cat "$tmp/gcc.log" >&2; die "the probe compile with gcc failed"; }
	"$tmp/probe" >/dev/null || die "the probe compiled by gcc does not run"
	{
		tr ' =' '\n\n' <"$tmp/gcc.log" | grep '^/' || true
		# Always read, never listed: the implicit pre-include, and the
		# assembler and linker gcc finds in PATH.
		echo /usr/include/stdc-predef.h
		command -v as ld
	} | while read -r p; do
		p=$(realpath -ms -- "$p")
		case $p in /usr/* | /lib/* | /lib64/*) [[ -f $p ]] && echo "$p" ;; esac
	done | sort -u
}

IFS=, read -ra want <<<"$langs"
for l in "${want[@]}"; do
	case $l in
	bash)
		need /usr/bin/bash bash
		extra+=(/usr/bin/bash)
		;;
	python)
		need /usr/bin/python3 python
		stdlib=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
		extra+=(/usr/bin/python3 "$stdlib")
		;;
	javascript)
		need /usr/bin/node javascript
		extra+=(/usr/bin/node)
		;;
	c)
		need /usr/bin/gcc c
		gcc_files >"$tmp/gcc.files"
		mapfile -t files <"$tmp/gcc.files"
		log "gcc: ${#files[@]} files"
		extra+=(/usr/bin/gcc "${files[@]}")
		;;
	*) die "VMCHECK_LANGUAGES: unknown language $l (want bash, python, c, javascript)" ;;
	esac
done

# ---------------------------------------------------------------- boot
export CGV2_EXTRA="${extra[*]} ${CGV2_EXTRA:-}"
export CGV2_ENV="VMCHECK_SANDBOX_RUN=$bin VMCHECK_LAYOUT=$layout VMCHECK_LANGUAGES=$langs${VMCHECK_CONCURRENCY:+ VMCHECK_CONCURRENCY=$VMCHECK_CONCURRENCY} ${CGV2_ENV:-}"
export CGV2_CGROUP=${CGV2_CGROUP-/test.slice/sandbox-run.service}
export CGV2_MODULES=${CGV2_MODULES-overlay}
vmlog=$logdir/vm-$layout.log
log "booting the VM (layout $layout, cgroup ${CGV2_CGROUP:-/}); console in $vmlog"
start=$SECONDS
rc=0
bash scripts/cgroupv2-vm/run.sh -m "${VMCHECK_MEM:-2048}" -c "${VMCHECK_CPUS:-2}" -t "${VMCHECK_TIMEOUT:-900}" \
	-- "$out/vm-check" </dev/null | tee "$vmlog" || rc=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))
if [[ $rc -eq 0 ]] && ! grep -q '^VMCHECK-RESULT=PASS' "$vmlog"; then
	log "the driver exited 0 without VMCHECK-RESULT=PASS"
	rc=1
fi
log "layout $layout: exit status $rc after ${elapsed}s ($(grep -m1 '^vm-check: [0-9]* passed' "$vmlog" || echo 'no summary'))"
exit "$rc"
