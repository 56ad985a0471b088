#!/usr/bin/env bash
# Benchmarks of what a sandbox costs over plain fork/exec (docs/BENCHMARKS.md).
#
#   scripts/bench.sh            go test benchmarks, the CLI bench with no pause
#                               and with a 50 ms pause between runs, then the suite
#   scripts/bench.sh go         only: go test -run '^$' -bench . -benchtime 200x ./pkg/sandbox/
#   scripts/bench.sh cli        only the CLI bench (N=300 runs of each variant)
#   scripts/bench.sh suite      only: sandbox-run bench --suite, every comparison
#                               through the HTTP API in one run (bash true and echo
#                               hi, python and node hello, the compile cache, docker
#                               run, the server's memory); ~6 min
#   scripts/bench.sh phases     where a sandboxed run's time goes, phase by phase,
#                               from kernel trace events (root, tracefs)
#
# Environment: BENCHTIME (default 200x), N (default 300; 60 for phases),
# PAUSE_N (runs for the paused CLI bench, default 100), DOCKER (auto: the
# suite compares with docker run when a docker engine answers, and says
# "skipped" otherwise; off: never), SUITE_FLAGS (more flags for the suite,
# e.g. "-parts api,memory -duration 3s").
# Runs as root: the sandbox needs it. Never asserts times: these machines are
# noisy, compare the figures of one run with each other.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
mode=${1:-all}

hostinfo() {
	echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, $(go version | cut -d' ' -f3)," \
		"cgroup $(if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo v2; else echo v1; fi)," \
		"load $(cut -d' ' -f1-3 /proc/loadavg)"
}

build() {
	mkdir -p bin
	go build -o bin/sandbox-run ./cmd/sandbox-run
}

run_go() {
	hostinfo
	go test -run '^$' -bench . -benchtime "${BENCHTIME:-200x}" ./pkg/sandbox/
}

run_cli() {
	build
	hostinfo
	bin/sandbox-run bench -n "${N:-300}"
	echo
	bin/sandbox-run bench -n "${PAUSE_N:-100}" -pause 50ms
}

run_suite() {
	build
	hostinfo
	# shellcheck disable=SC2086 # SUITE_FLAGS is a list of flags
	bin/sandbox-run bench --suite -docker "${DOCKER:-auto}" ${SUITE_FLAGS:-}
}

# phases traces `sandbox-run bench` with sched, cgroup and syscall events,
# only for its own process tree, and splits each sandboxed run (from its
# cgroup's mkdir to its rmdir) at the boundaries the events mark.
run_phases() {
	build
	local T=/sys/kernel/tracing mounted=
	if [ ! -e $T/trace ]; then
		mount -t tracefs nodev $T
		mounted=1
	fi
	local out
	out=$(mktemp -d)
	echo 0 >$T/tracing_on
	echo 0 >$T/events/enable
	echo >$T/trace
	echo 16384 >$T/buffer_size_kb
	echo 1 >$T/options/event-fork
	local e
	for e in sched/sched_process_fork sched/sched_process_exec sched/sched_process_exit \
		cgroup/cgroup_attach_task cgroup/cgroup_mkdir cgroup/cgroup_rmdir \
		syscalls/sys_enter_fsopen syscalls/sys_enter_clone syscalls/sys_enter_clone3 \
		syscalls/sys_exit_execve syscalls/sys_enter_read syscalls/sys_exit_read \
		syscalls/sys_enter_mount syscalls/sys_enter_sethostname syscalls/sys_enter_capset \
		syscalls/sys_enter_exit_group syscalls/sys_exit_waitid; do
		echo 1 >$T/events/$e/enable
	done
	(
		echo "$BASHPID" >$T/set_event_pid
		echo 1 >$T/tracing_on
		exec bin/sandbox-run bench -n "${N:-60}" -warmup 5 >"$out/bench.txt"
	) || true
	echo 0 >$T/tracing_on
	cat $T/trace >"$out/trace.txt"
	echo 0 >$T/events/enable
	echo >$T/set_event_pid
	echo 0 >$T/options/event-fork
	echo >$T/trace
	if [ -n "$mounted" ]; then umount $T; fi
	hostinfo
	python3 - "$out/trace.txt" <<'EOF'
import re, statistics, sys
line_re = re.compile(r'^\s*(.+?)-(\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[\d+\]\s+\S+\s+([\d.]+):\s+(\w+)(.*)$')
events = []
for line in open(sys.argv[1]):
    m = line_re.match(line)
    if m:
        comm, pid, ts, name, rest = m.group(1).strip(), int(m.group(2)), float(m.group(3)) * 1e3, m.group(4), m.group(5)
        if rest.startswith(' -> '):
            name += '_ret'
        events.append((ts, comm, pid, name, rest))
# one window per run cgroup: from its first mkdir to its last rmdir
windows, order = {}, []
for i, e in enumerate(events):
    m = re.search(r'path=\S*/(run-\d+-\d+)', e[4])
    if m and e[3] in ('cgroup_mkdir', 'cgroup_rmdir'):
        w = windows.setdefault(m.group(1), [i, i])
        w[1] = i
        if m.group(1) not in order:
            order.append(m.group(1))
P = [('host: cgroup mkdir + limits', 'start', 'fsopen'),
     ('host: /work tmpfs, pipes', 'fsopen', 'clone'),
     ('clone (7 namespaces), uid maps, exec init', 'clone', 'initexec'),
     ('init: Go runtime start, until it reads config', 'initexec', 'cfgread'),
     ('init: waits for config (host joins cgroups)', 'cfgread', 'cfgdone'),
     ('init: cgroupns, open binds, setres[ug]id', 'cfgdone', 'mount1'),
     ('init: mounts, /proc, /dev, /etc, pivot_root', 'mount1', 'hostname'),
     ('init: hostname, lo, rlimits, close_range', 'hostname', 'capdrop'),
     ('init: drop caps, seccomp, fork+exec program', 'capdrop', 'progexec'),
     ('program runs', 'progexec', 'progexit'),
     ('program exit -> init exit', 'progexit', 'initexit'),
     ('init exit -> host reaps it (ns teardown)', 'initexit', 'reaped'),
     ('host: usage, kill, cgroup rmdir', 'reaped', 'end'),
     ('TOTAL (cgroup mkdir -> rmdir)', 'start', 'end'),
     ('  of which: cgroup join, from init exec', 'initexec', 'joined')]
groups, ntrue = {}, 0
for name in order:
    a, b = windows[name]
    E = events[a:b + 1]
    init = next((e[2] for e in E if e[3] == 'sched_process_exec' and '/proc/self/fd/' in e[4]), None)
    tree = {init}
    for e in E:
        if e[3] == 'sched_process_fork' and e[2] in tree:
            tree.add(int(re.search(r'child_pid=(\d+)', e[4]).group(1)))
    prog = next((e for e in E if e[3] == 'sched_process_exec' and e[2] in tree and '/proc/self/fd/' not in e[4]), None)
    if prog is None:
        continue
    progpid = prog[2]
    def first(pred, after=0):
        return next((e[0] for e in E if e[0] >= after and pred(e)), None)
    def last(pred):
        return max((e[0] for e in E if pred(e)), default=None)
    T = {'start': E[0][0], 'end': E[-1][0]}
    T['fsopen'] = first(lambda e: e[3] == 'sys_fsopen' and e[2] not in tree)
    T['clone'] = first(lambda e: e[3] in ('sys_clone', 'sys_clone3') and e[2] not in tree, T['fsopen'] or 0)
    T['initexec'] = first(lambda e: e[3] == 'sys_execve_ret' and e[2] == init)
    T['joined'] = last(lambda e: e[3] == 'cgroup_attach_task' and f'pid={init} ' in e[4] + ' ')
    T['cfgread'] = first(lambda e: e[3] == 'sys_read' and e[2] in tree and '(fd: 3,' in e[4], T['initexec'] or 0)
    rdpid = next((e[2] for e in E if e[0] == T['cfgread'] and e[3] == 'sys_read'), None)
    T['cfgdone'] = first(lambda e: e[3] == 'sys_read_ret' and e[2] == rdpid, T['cfgread'] or 0)
    T['mount1'] = first(lambda e: e[3] == 'sys_mount' and e[2] in tree)
    T['hostname'] = first(lambda e: e[3] == 'sys_sethostname' and e[2] in tree)
    T['capdrop'] = first(lambda e: e[3] == 'sys_capset' and e[2] in tree, T['hostname'] or 0)
    T['progexec'] = first(lambda e: e[3] == 'sys_execve_ret' and e[2] == progpid)
    T['progexit'] = first(lambda e: e[3] == 'sched_process_exit' and e[2] == progpid)
    T['initexit'] = first(lambda e: e[3] == 'sys_exit_group' and e[2] in tree and e[2] != progpid, T['progexit'] or 0)
    T['reaped'] = first(lambda e: e[3] == 'sys_waitid_ret' and e[2] not in tree, T['initexit'] or 0)
    if None in T.values():
        continue
    label = 'python hello sandbox'
    if 'python' not in prog[4]:
        label = 'sandbox /bin/true' if ntrue % 2 == 0 else 'sandbox /bin/true, back-to-back'
        ntrue += 1
    groups.setdefault(label, []).append(T)
for label, runs in groups.items():
    print('\n%s: median (min-max) ms of %d runs' % (label, len(runs)))
    for name, a, b in P:
        v = [t[b] - t[a] for t in runs]
        print('  %-48s %6.2f  (%.2f-%.2f)' % (name, statistics.median(v), min(v), max(v)))
EOF
	echo
	cat "$out/bench.txt"
	rm -r "$out"
}

case $mode in
go) run_go ;;
cli) run_cli ;;
suite) run_suite ;;
phases) run_phases ;;
all)
	run_go
	echo
	run_cli
	echo
	run_suite
	;;
*)
	echo "usage: $0 [all|go|cli|suite|phases]" >&2
	exit 2
	;;
esac
