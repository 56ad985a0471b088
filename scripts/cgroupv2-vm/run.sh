#!/usr/bin/env bash
# Run a (statically linked) binary as the only workload of a throwaway Debian
# VM, under QEMU (TCG, no KVM). The VM's cgroups are a pure cgroup v2
# hierarchy (CGV2_LAYOUT=v2, the default) or cgroup v1 hierarchies mounted
# the way systemd mounts them on a v1 host (CGV2_LAYOUT=v1; hybrid adds an
# empty cgroup2 at /sys/fs/cgroup/unified, as systemd's hybrid mode does).
#
#   scripts/cgroupv2-vm/run.sh [-m MEM_MB] [-t TIMEOUT_S] [-c CPUS] -- BINARY [ARGS...]
#
# The console output of the VM goes to stdout; this script's own messages go
# to stderr. The exit status is the exit status of BINARY inside the VM, 125
# if the VM never reported one (boot failure, panic, timeout, ...), and 2 for
# usage errors. See README.md beside this file for the environment knobs.
set -Eeuo pipefail

readonly PROG=${0##*/}
readonly EXIT_MARK=CGV2-EXIT
readonly VM_FAILED=125

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit "$VM_FAILED"; }
usage() {
	cat >&2 <<USAGE
usage: $PROG [-m MEM_MB] [-t TIMEOUT_S] [-c CPUS] -- BINARY [ARGS...]

  -m MEM_MB     guest memory in MiB (default 1024)
  -t TIMEOUT_S  host-side timeout for the whole VM run (default 600)
  -c CPUS       guest vCPUs (default 2)

Environment:
  CGV2_CACHE        kernel cache dir (default \${XDG_CACHE_HOME:-\$HOME/.cache}/sandbox-run/cgroupv2-vm)
  CGV2_KERNEL       use this bzImage instead of Debian's cloud kernel
  CGV2_MODULES      space-separated kernel modules to load at boot (e.g. "overlay
                    fuse"), taken from the cached kernel's own package
  CGV2_EXTRA        space-separated absolute host paths copied into the VM at the
                    same path (ELF files bring their shared libraries along)
  CGV2_ENV          space-separated NAME=VALUE pairs exported to BINARY
  CGV2_WORKDIR      directory BINARY starts in inside the VM (default /)
  CGV2_LAYOUT       v2 (default: pure cgroup v2), v1 (cgroup v1 hierarchies as
                    systemd mounts them: cpu,cpuacct co-mounted with cpu and
                    cpuacct symlinks, memory, pids, ...) or hybrid (v1 plus an
                    empty cgroup2 at /sys/fs/cgroup/unified)
  CGV2_CONTROLLERS  v2: controllers enabled in the root subtree_control
                    (default "cpu memory pids cpuset")
  CGV2_CGROUP       if set (e.g. /test.slice/testbin.service), BINARY (alone)
                    starts in this cgroup (v1: in every hierarchy) instead of
                    the root one, like a systemd unit
  CGV2_APPEND       extra kernel command line (e.g. loglevel=7)
  CGV2_DMESG=1      print the guest's dmesg after BINARY exits
  CGV2_ACCEL        QEMU accelerator (default tcg)
  CGV2_QEMU_OPTS    extra qemu-system-x86_64 arguments (word-split)
  CGV2_BUSYBOX      path of a static busybox (default: busybox-static's)
USAGE
}

# ---------------------------------------------------------------- arguments
mem_mb=1024
timeout_s=600
cpus=2
while getopts ':m:t:c:h' opt; do
	case $opt in
	m) mem_mb=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	c) cpus=$OPTARG ;;
	h) usage; exit 0 ;;
	:) log "option -$OPTARG needs a value"; usage; exit 2 ;;
	*) log "unknown option -$OPTARG"; usage; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ ${1-} == -- ]] && shift
if [[ $# -lt 1 ]]; then usage; exit 2; fi
for n in "$mem_mb" "$timeout_s" "$cpus"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || { log "not a positive integer: $n"; exit 2; }
done
binary=$1
shift
[[ -f $binary && -x $binary ]] || { log "not an executable file: $binary"; exit 2; }

cache=${CGV2_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sandbox-run/cgroupv2-vm}
accel=${CGV2_ACCEL:-tcg}
controllers=${CGV2_CONTROLLERS:-cpu memory pids cpuset}
layout=${CGV2_LAYOUT:-v2}
case $layout in
v1 | v2 | hybrid) ;;
*) log "CGV2_LAYOUT must be v2, v1 or hybrid, not $layout"; exit 2 ;;
esac

# ---------------------------------------------------------------- cleanup
tmp=
vm_pid=
finished=
err_at=
trap 'err_at="line $LINENO: $BASH_COMMAND"' ERR
# shellcheck disable=SC2317 # invoked by the traps
cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP ERR
	if [[ -z $finished && $rc -ne 0 && $rc -ne $VM_FAILED ]]; then
		# An unexpected failure of this script, not of the binary under test.
		log "error: internal failure (status $rc) at ${err_at:-unknown}"
		rc=$VM_FAILED
	fi
	if [[ -n $vm_pid ]]; then
		kill -TERM "$vm_pid" 2>/dev/null || true
		wait "$vm_pid" 2>/dev/null || true
	fi
	[[ -n $tmp ]] && rm -rf -- "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'finished=1; exit 130' INT
trap 'finished=1; exit 143' TERM
trap 'finished=1; exit 129' HUP

# ---------------------------------------------------------------- host tools
as_root() {
	if [[ $(id -u) -eq 0 ]]; then "$@"
	elif command -v sudo >/dev/null; then sudo -n "$@"
	else die "need root to run: $*"
	fi
}

# apt_get ARGS...: run apt-get quietly; its output is shown only if it fails.
apt_get() {
	local out
	out=$(mktemp -- "$tmp/apt.XXXXXX")
	if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -y "$@" </dev/null >"$out" 2>&1; then
		cat -- "$out" >&2
		die "apt-get $* failed"
	fi
}

apt_updated=
apt_update() {
	[[ -n $apt_updated ]] && return 0
	log "apt-get update"
	apt_get update
	apt_updated=1
}

is_static() { # ELF without a dynamic loader (ldd exits non-zero on those)
	! ldd "$1" >/dev/null 2>&1
}

busybox=
find_busybox() {
	local b
	for b in ${CGV2_BUSYBOX:-} /bin/busybox /usr/bin/busybox; do
		if [[ -x $b ]] && is_static "$b"; then busybox=$b; return 0; fi
	done
	return 1
}

ensure_tools() {
	local pkgs=()
	command -v qemu-system-x86_64 >/dev/null || pkgs+=(qemu-system-x86)
	command -v cpio >/dev/null || pkgs+=(cpio)
	find_busybox || pkgs+=(busybox-static)
	[[ ${#pkgs[@]} -eq 0 ]] && return 0
	apt_update
	log "apt-get install ${pkgs[*]}"
	apt_get install --no-install-recommends "${pkgs[@]}"
	find_busybox || die "no static busybox found after installing busybox-static"
}

# ---------------------------------------------------------------- kernel
# The cache holds vmlinuz (the only thing a plain run needs), the kernel .deb
# it came from (so that modules always match it), and, once CGV2_MODULES is
# used, that .deb's lib/modules tree with a modules.dep.
kernel=
kernel_pkg() {
	apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		awk '/Depends: linux-image-/ && !found {print $2; found = 1}' || true
}

# fetch_deb PKG DIR: download PKG's .deb into DIR.
fetch_deb() {
	log "downloading kernel package $1 into $cache"
	(cd -- "$2" && apt-get -qq -o APT::Sandbox::User=root download "$1" >&2) ||
		die "apt-get download $1 failed"
}

ensure_kernel() {
	if [[ -n ${CGV2_KERNEL:-} ]]; then
		[[ -f $CGV2_KERNEL ]] || die "CGV2_KERNEL=$CGV2_KERNEL does not exist"
		kernel=$CGV2_KERNEL
		return 0
	fi
	kernel=$cache/vmlinuz
	[[ -f $kernel ]] && return 0
	mkdir -p -- "$cache"
	(
		flock 9 # concurrent first runs download once
		[[ -f $kernel ]] && exit 0
		pkg=$(kernel_pkg)
		if [[ -z $pkg ]]; then apt_update; pkg=$(kernel_pkg); fi
		[[ -n $pkg ]] || die "cannot resolve linux-image-cloud-amd64"
		dl=$(mktemp -d -- "$cache/dl.XXXXXX")
		trap 'rm -rf -- "$dl"' EXIT
		fetch_deb "$pkg" "$dl"
		deb=("$dl"/*.deb)
		dpkg-deb --fsys-tarfile "${deb[0]}" | tar -x -C "$dl" ./boot
		cp -- "$dl"/boot/config-* "$cache/config" 2>/dev/null || true
		printf '%s\n' "$pkg" >"$cache/kernel-package"
		mv -f -- "${deb[0]}" "$cache/kernel.deb"
		mv -f -- "$dl"/boot/vmlinuz-* "$kernel"
	) 9>"$cache/.lock"
	[[ -f $kernel ]] || die "kernel download failed"
}

# ensure_modules: lib/modules of the cached kernel, extracted once.
modroot=
kver=
ensure_modules() {
	[[ -n ${CGV2_MODULES:-} ]] || return 0
	[[ -z ${CGV2_KERNEL:-} ]] || die "CGV2_MODULES cannot be used with CGV2_KERNEL"
	modroot=$cache/modroot
	(
		flock 9
		compgen -G "$modroot/lib/modules/*/modules.dep" >/dev/null && exit 0
		if [[ ! -f $cache/kernel.deb ]]; then
			pkg=$(head -n 1 "$cache/kernel-package" 2>/dev/null || true)
			[[ -n $pkg ]] || die "no kernel-package in $cache: delete $cache and retry"
			dl=$(mktemp -d -- "$cache/dl.XXXXXX")
			trap 'rm -rf -- "$dl"' EXIT
			fetch_deb "$pkg" "$dl" ||
				die "cannot fetch $pkg for modules: delete $cache to start over with the current kernel"
			deb=("$dl"/*.deb)
			mv -f -- "${deb[0]}" "$cache/kernel.deb"
		fi
		rm -rf -- "$modroot" "$modroot.part"
		mkdir -p -- "$modroot.part"
		dpkg-deb --fsys-tarfile "$cache/kernel.deb" | tar -x -C "$modroot.part" ./lib/modules
		v=$(ls -- "$modroot.part/lib/modules")
		"$busybox" depmod -b "$modroot.part" "$v"
		mv -- "$modroot.part" "$modroot"
	) 9>"$cache/.lock"
	kver=$(ls -- "$modroot/lib/modules")
	[[ -f $modroot/lib/modules/$kver/modules.dep ]] || die "no modules.dep for the cached kernel"
}

# copy_modules: CGV2_MODULES and their dependencies into the initramfs.
copy_modules() {
	[[ -n ${CGV2_MODULES:-} ]] || return 0
	local m n line f d=lib/modules/$kver
	mkdir -p "$root/$d"
	cp -- "$modroot/$d/modules.dep" "$root/$d/"
	for m in $CGV2_MODULES; do
		n=${m//-/_}
		line=$(awk -F: -v n="$n" '{ b = $1; sub(/.*\//, "", b); sub(/\.ko.*/, "", b); gsub(/-/, "_", b)
			if (b == n) { print; exit } }' "$modroot/$d/modules.dep")
		[[ -n $line ]] || die "module $m is not in $kver (it may be built in: then drop it from CGV2_MODULES)"
		for f in ${line/:/ }; do
			[[ -e $root/$d/$f ]] || (cd "$modroot/$d" && cp --parents -- "$f" "$root/$d/")
		done
	done
}

# ---------------------------------------------------------------- initramfs
# shq WORD: WORD quoted for a POSIX shell.
shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

# put_file HOSTPATH: copy a file (dereferenced) to the same path under $root.
# (Not `cp --parents`: coreutils 9.1's fails on absolute sources depending on
# the current directory when it also preserves attributes.)
put_file() {
	mkdir -p -- "$root${1%/*}"
	cp -L --preserve=mode,timestamps --remove-destination -- "$1" "$root$1"
}

# put_libs ELF: the shared libraries ELF needs, at their host paths.
put_libs() {
	local lib
	is_static "$1" && return 0
	while read -r lib; do
		[[ -e $root$lib ]] || put_file "$lib"
	done < <(ldd "$1" 2>/dev/null | grep -oE '(^|[[:space:]])/[^[:space:]]+' | tr -d '[:blank:]' || true)
}

# copy_in HOSTPATH: copy to the same path under $root (a file dereferenced, a
# directory with its inner symlinks kept), plus the shared libraries of ELFs.
copy_in() {
	local p=$1
	[[ $p == /* ]] || die "CGV2_EXTRA entries must be absolute: $p"
	[[ -e $p ]] || die "CGV2_EXTRA entry does not exist: $p"
	p=${p%/}
	if [[ -d $p ]]; then
		mkdir -p -- "$root$p"
		cp -a -- "$p/." "$root$p/"
	else
		put_file "$p"
		[[ -x $p ]] && put_libs "$p"
	fi
	return 0
}

build_initramfs() {
	root=$tmp/root
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,root,newroot}
	chmod 1777 "$root/tmp"

	local p
	for p in ${CGV2_EXTRA:-}; do copy_in "$p"; done

	cp -L --remove-destination -- "$binary" "$root/bin/testbin"
	chmod 0755 "$root/bin/testbin"
	if ! is_static "$binary"; then
		log "warning: $binary is dynamically linked; bringing its libraries along"
		put_libs "$binary"
	fi

	copy_modules

	cp -L --remove-destination -- "$busybox" "$root/bin/busybox"
	local applet
	for applet in $("$busybox" --list); do
		[[ -e $root/bin/$applet || -L $root/bin/$applet ]] || ln -s busybox "$root/bin/$applet"
	done

	printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
		'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$root/etc/passwd"
	printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$root/etc/group"
	printf '%s\n' '127.0.0.1 localhost cgv2-vm' '::1 localhost' >"$root/etc/hosts"
	echo cgv2-vm >"$root/etc/hostname"

	# Per-run settings, sourced by /init: all values quoted on the host.
	{
		printf 'set --'
		for p in "$@"; do printf ' %s' "$(shq "$p")"; done
		printf '\n'
		printf 'CGV2_CONTROLLERS=%s\n' "$(shq "$controllers")"
		printf 'CGV2_LAYOUT=%s\n' "$(shq "$layout")"
		printf 'CGV2_WORKDIR=%s\n' "$(shq "${CGV2_WORKDIR:-/}")"
		printf 'CGV2_CGROUP=%s\n' "$(shq "${CGV2_CGROUP:-}")"
		printf 'CGV2_DMESG=%s\n' "$(shq "${CGV2_DMESG:-}")"
		printf 'CGV2_MODULES=%s\n' "$(shq "${CGV2_MODULES:-}")"
		local kv
		for kv in ${CGV2_ENV:-}; do
			[[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "CGV2_ENV entry is not NAME=VALUE: $kv"
			printf 'export %s=%s\n' "${kv%%=*}" "$(shq "${kv#*=}")"
		done
	} >"$root/etc/cgv2.conf"

	cat >"$root/init" <<'INIT'
#!/bin/sh
# PID 1 of the cgroup test VM (generated by scripts/cgroupv2-vm/run.sh).
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=dumb TMPDIR=/tmp
say() { echo "cgv2-vm: $*"; }
halt() { sync; poweroff -f; sleep 5; echo o >/proc/sysrq-trigger; }

if [ "${CGV2_STAGE:-1}" = 1 ]; then
	# Stage 1: the initramfs root is the kernel's rootfs, on which
	# pivot_root(2) fails with EINVAL (it has no parent mount). Move
	# everything onto a real tmpfs mount and switch_root to it, so the
	# workload sees a root like a normal host's.
	if mount -t tmpfs -o mode=0755 tmpfs /newroot; then
		for f in /*; do
			[ "$f" = /newroot ] || cp -a "$f" /newroot/
		done
		export CGV2_STAGE=2
		exec switch_root /newroot /init
	fi
	say "warning: switch_root to tmpfs failed; staying on rootfs"
fi

unset CGV2_STAGE
mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount -t devtmpfs -o nosuid,mode=0755 devtmpfs /dev
exec </dev/null >/dev/console 2>&1
mkdir -p /dev/pts /dev/shm
mount -t devpts -o nosuid,noexec,newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev tmpfs /dev/shm
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /tmp
mkdir -p /run && mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs /run
hostname cgv2-vm
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

. /etc/cgv2.conf

if [ "$CGV2_LAYOUT" = v2 ]; then
	# Same mount options as systemd uses on a cgroup v2 host.
	mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup ||
		mount -t cgroup2 cgroup2 /sys/fs/cgroup ||
		say "error: cannot mount cgroup2"
else
	# As systemd mounts cgroup v1 ("legacy"; "hybrid" adds an empty v2 at
	# unified): a tmpfs, one hierarchy per controller but cpu,cpuacct and
	# net_cls,net_prio co-mounted and reachable through symlinks, and its
	# own named hierarchy.
	mount -t tmpfs -o nosuid,nodev,noexec,mode=0755 tmpfs /sys/fs/cgroup
	for h in cpu,cpuacct memory pids cpuset blkio devices freezer net_cls,net_prio perf_event hugetlb; do
		mkdir -p "/sys/fs/cgroup/$h"
		mount -t cgroup -o "nosuid,nodev,noexec,$h" cgroup "/sys/fs/cgroup/$h" || say "warning: cannot mount cgroup v1 $h"
	done
	for l in cpu cpuacct net_cls net_prio; do
		case $l in cpu*) t=cpu,cpuacct ;; *) t=net_cls,net_prio ;; esac
		ln -s "$t" "/sys/fs/cgroup/$l"
	done
	mkdir -p /sys/fs/cgroup/systemd
	mount -t cgroup -o nosuid,nodev,noexec,none,name=systemd cgroup /sys/fs/cgroup/systemd
	if [ "$CGV2_LAYOUT" = hybrid ]; then
		mkdir -p /sys/fs/cgroup/unified
		mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate cgroup2 /sys/fs/cgroup/unified
	fi
	# v1 memory cgroups nest their limits only with this (systemd sets it).
	echo 1 >/sys/fs/cgroup/memory/memory.use_hierarchy 2>/dev/null
fi

for m in $CGV2_MODULES; do
	modprobe "$m" && say "loaded module $m" || say "warning: cannot load module $m"
done

say "kernel $(uname -r), $(nproc) cpus, $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) MiB"
if [ "$CGV2_LAYOUT" = v2 ]; then
	say "cgroup.controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
	for c in $CGV2_CONTROLLERS; do
		echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || say "warning: cannot enable +$c"
	done
	say "cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
else
	say "cgroup $CGV2_LAYOUT: $(grep -E ' - cgroup2? ' /proc/self/mountinfo | awk '{print $5}' | tr '\n' ' ')"
fi

n=$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 0)
if [ "$n" = 0 ]; then
	echo 15000 >/proc/sys/user/max_user_namespaces 2>/dev/null
	n=$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo 0)
fi
say "user.max_user_namespaces: $n"
if [ -e /proc/sys/kernel/unprivileged_userns_clone ]; then
	say "kernel.unprivileged_userns_clone: $(cat /proc/sys/kernel/unprivileged_userns_clone)"
fi

# The cgroup directories BINARY starts in (one per v1 hierarchy).
dirs=
if [ -n "$CGV2_CGROUP" ] && [ "$CGV2_LAYOUT" = v2 ]; then
	# A leaf cgroup with the parent's controllers delegated, like a systemd
	# service with Delegate=yes.
	d=/sys/fs/cgroup
	for part in $(echo "$CGV2_CGROUP" | tr / ' '); do
		for c in $CGV2_CONTROLLERS; do
			echo "+$c" >"$d/cgroup.subtree_control" 2>/dev/null
		done
		d=$d/$part
		mkdir -p "$d"
	done
	dirs=$d
elif [ -n "$CGV2_CGROUP" ]; then
	# The hierarchies systemd makes a unit's cgroup in (with Delegate=yes);
	# cpuset and the others stay at the root, as with systemd.
	for h in systemd cpu,cpuacct memory pids blkio devices; do
		h=/sys/fs/cgroup/$h
		mkdir -p "$h$CGV2_CGROUP" && dirs="$dirs $h$CGV2_CGROUP"
	done
fi
[ -n "$dirs" ] && say "running in cgroup $CGV2_CGROUP"

cd "$CGV2_WORKDIR" || say "warning: cannot cd to $CGV2_WORKDIR"
say "running /bin/testbin $*"
# BINARY alone goes into the cgroup, as a unit's main process does: this
# shell (PID 1) stays in the root cgroup.
CGV2_DIRS=$dirs sh -c 'for d in $CGV2_DIRS; do echo $$ >"$d/cgroup.procs" || exit 125; done
	unset CGV2_DIRS; exec /bin/testbin "$@"' testbin "$@" </dev/null
rc=$?
cd /
[ -n "$CGV2_DMESG" ] && { say "dmesg:"; dmesg; }
# Leading newline: the marker must start a line even if testbin's last
# output line was not terminated.
printf '\n%s\n' "CGV2-EXIT=$rc"
halt
INIT
	chmod 0755 "$root/init"

	# Uncompressed: the guest unpacks it much faster than a gzip'd one under TCG.
	(cd "$root" && find . -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc -R 0:0 --quiet) >"$tmp/initrd.cpio"
}

# ---------------------------------------------------------------- run
tmp=$(mktemp -d -- "${TMPDIR:-/tmp}/cgv2-vm.XXXXXX")
ensure_tools
ensure_kernel
ensure_modules
build_initramfs "$@"

append="console=ttyS0 panic=-1 quiet loglevel=2 rdinit=/init"
if [[ $layout == v2 ]]; then append+=" cgroup_no_v1=all"; fi
append+=" ${CGV2_APPEND:-}"

qemu=(qemu-system-x86_64 -accel "$accel" -cpu max -m "$mem_mb" -smp "$cpus"
	-nographic -nodefaults -no-user-config -serial stdio -monitor none
	-nic none -no-reboot
	-kernel "$kernel" -initrd "$tmp/initrd.cpio" -append "$append")
# qboot (from qemu-system-data) boots a -kernel faster than SeaBIOS and does
# not write terminal escape sequences to the serial console.
qboot=/usr/share/qemu/qboot.rom
[[ -f $qboot ]] && qemu+=(-bios "$qboot")
# shellcheck disable=SC2206 # word splitting intended
qemu+=(${CGV2_QEMU_OPTS:-})

mkfifo "$tmp/console"
start=$(date +%s%N)
# stdin is /dev/null: the guest never reads the host terminal (and qemu never
# puts it in raw mode); the serial console is output-only.
timeout -k 10 "$timeout_s" "${qemu[@]}" </dev/null >"$tmp/console" 2>&1 &
vm_pid=$!
tr -d '\r' <"$tmp/console" | tee "$tmp/console.log"
vm_rc=0
wait "$vm_pid" || vm_rc=$?
vm_pid=
elapsed=$((($(date +%s%N) - start) / 1000000))

rc=$(grep -aoE "^$EXIT_MARK=[0-9]+" "$tmp/console.log" | tail -n 1 | cut -d= -f2 || true)
if [[ -z $rc ]]; then
	case $vm_rc in
	124 | 137) log "VM timed out after ${timeout_s}s" ;;
	0) log "VM exited without reporting $EXIT_MARK (panic or early poweroff?)" ;;
	*) log "qemu failed with exit status $vm_rc" ;;
	esac
	log "VM ran for $((elapsed / 1000)).$(printf '%03d' $((elapsed % 1000)))s; exit $VM_FAILED"
	finished=1
	exit "$VM_FAILED"
fi
log "VM ran for $((elapsed / 1000)).$(printf '%03d' $((elapsed % 1000)))s; testbin exit status $rc"
finished=1
exit "$rc"
