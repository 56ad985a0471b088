// Package sandbox runs one process tree in isolation and reports what it did.
//
// A run gets fresh user, pid, mount, net, ipc, uts and cgroup namespaces, a
// tmpfs root with read-only system and toolchain binds, size-limited tmpfs
// /work and /tmp, a private /proc and a minimal /dev, an unprivileged uid, no
// capabilities, no_new_privs, rlimits, a seccomp allow-list and its own cgroup
// (v1 or v2) for memory, processes and CPU. When the run ends every process of
// it is dead, its cgroup is removed and nothing of it remains on the host.
//
// The package knows nothing of languages or HTTP: a Spec goes in, a Result
// comes out. Programs that use it must call Init first thing in main, because
// the sandbox's PID 1 is this same binary re-executed:
//
//	func main() {
//		sandbox.Init()
//		...
//	}
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Spec describes one run. The zero value of each limit means the default in
// DefaultLimits, never "unlimited".
type Spec struct {
	// Args is the argv of the program; Args[0] is looked up in Env's PATH
	// inside the sandbox when it has no slash.
	Args []string
	// Env is the program's whole environment: nothing of the caller's leaks.
	Env []string
	// Dir is the working directory inside the sandbox (default /work).
	Dir string

	// Stdin feeds the program's standard input; nil means empty input.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the program's output live as it is
	// produced (up to the output limit), besides the copy kept in the Result.
	Stdout, Stderr io.Writer

	// Tenant is who the run is for (an API key's id; "" for one that is
	// no one's in particular). What a run may leave in the engine for the
	// next run of its sandbox, its recycled cgroup on v1, is left only to
	// a run of the same tenant.
	Tenant string

	// Mounts are host paths made visible inside, read-only unless Writable.
	Mounts []Mount
	// Root, when set, is a host directory whose entries make the sandbox's
	// root instead of the host's (an image's unpacked root: trusted, never
	// written): its directories and files are bound read-only, its
	// symlinks recreated as they are (never followed on the host), and
	// the entries of its etc/ one by one but for passwd, group and hosts,
	// which the sandbox writes. /work, /tmp, /dev/shm, /proc and /dev are
	// the sandbox's own as always; Mounts come on top (SystemMounts are
	// not wanted with a Root).
	Root string
	// Files are written into /work before the program starts.
	Files []File
	// Collect says which files of /work come back in Result.Files.
	Collect Collect

	Limits Limits
	// Hostname inside the sandbox (default "sandbox").
	Hostname string
	// ResultPipe gives the program a pipe on descriptor 3 whose contents
	// come back in Result.ResultData (up to the output limit): a channel
	// apart from stdout and stderr, e.g. for a runner's structured result,
	// that nothing the program prints can forge.
	ResultPipe bool
	// Stream, for a long-lived program whose caller takes its output as it
	// comes (an interpreter session's kernel): stdout, stderr and the
	// result pipe go only to Stdout, Stderr and ResultOut, nothing is kept
	// for the Result and OutputBytes does not apply; the caller bounds
	// what it takes.
	Stream    bool
	ResultOut io.Writer
	// Budget, when set, is shared with other runs: their captured output
	// and collected files together stay within it (see Budget).
	Budget *Budget
	// Network, when set, gives the run a network interface besides its
	// own loopback (see Network); nil, the default, gives it none.
	Network *Network
	// PTY gives the sandbox pseudo-terminals: a devpts instance of its own
	// at /dev/pts, with /dev/ptmx a link to its ptmx, so that programs
	// can open terminals (os.openpty, script, an interactive shell on a
	// terminal). The sandbox sees only the terminals it made, never the
	// host's. Without it the sandbox has no /dev/ptmx nor /dev/pts.
	PTY bool
	// Home, when set, is a path made in the sandbox's root as a symbolic
	// link to /work: a home directory by another name (E2B's /home/user)
	// on the same size-limited file system.
	Home string
	// Detachable lets the run outlive this process (Process.Detach, then
	// Engine.Adopt here or in the next process on the host). Its sandbox
	// serves this run alone, is never pooled (though fresh ones may be
	// built ahead: Engine.Prewarm), and its PID 1 has no
	// parent-death signal: until Detach, PID 1 ends the run when this
	// process goes (its control socket closes), as with any run; after,
	// it lets the program run on, and its stdout, stderr, result pipe and
	// stdin lead nowhere (writes fail with EPIPE, reads see the end). The
	// limits on memory, processes, CPU bandwidth and disk hold for its
	// whole life, and so does each process's RLIMIT_CPU backstop;
	// WallTime and CPUTime are watched by the process that holds the run,
	// and by none once it is detached: whoever adopts it ends it (Kill)
	// when its time is up. Its Network, whose host end lives in this
	// process, is detached with it: the adopter gives the run one anew
	// (Adopted.AttachNetwork).
	Detachable bool
	// FilesFrom, when set, is a host directory whose work and tmp
	// subdirectories (either may be missing) the run's /work and /tmp
	// start from, copy-on-write: each is an overlay whose lower layer is
	// that directory, read-only, as the sandbox's user owns it (an
	// idmapped mount through the sandbox's user namespace), and whose
	// upper layer is the run's own bounded file system (the run's changes
	// count against its size; nothing is copied up front). The engine
	// makes the sandbox's user (innerUser) own every file of it on disk.
	// The directory must stay as it is while the run lives: it is the
	// caller's, and nothing may write it.
	FilesFrom string
}

// ErrNoCopyOnWrite is a run with Spec.FilesFrom on a host whose kernel
// cannot make its overlays: an idmapped lower layer, layers given by
// O_PATH descriptors (Linux 6.15).
var ErrNoCopyOnWrite = errors.New("sandbox: this kernel cannot start a run from files copy-on-write")

// ErrTooLarge is a copy of a live run's files (Process.SaveFiles) past
// the bound it was given.
var ErrTooLarge = errors.New("sandbox: its files are larger than the bound")

// Network is a run's way out: a TUN device tun0 in the sandbox's network
// namespace, whose host end the caller serves (a userspace network stack
// that decides what may be reached: pkg/egress). The sandbox gets no
// interface on the host's network, only this device.
type Network struct {
	// Address is tun0's IPv4 address in the sandbox, with its prefix
	// (10.77.0.2/24).
	Address netip.Prefix
	// Gateway is the default route's next hop, inside Address's prefix.
	Gateway netip.Addr
	// Address6 and Gateway6, both set or neither, give tun0 an IPv6
	// address too (fd5b:77::2/64), without duplicate address detection,
	// and a default IPv6 route via Gateway6, inside Address6's prefix.
	// Without them, or where the kernel has IPv6 disabled, the sandbox
	// has IPv4 only.
	Address6 netip.Prefix
	Gateway6 netip.Addr
	// MTU of tun0 (default 1500; 1280 or more with IPv6).
	MTU int
	// Attach gets the host's end of tun0 (IFF_TUN|IFF_NO_PI|IFF_VNET_HDR
	// with TUN_F_CSUM offload: one virtio_net_hdr and one IP packet per
	// read or write, opened close-on-exec) before the program
	// starts, and owns it from then on. detach, called once the run is
	// over, must stop serving it and close it.
	Attach func(tun *os.File) (detach func(), err error)
}

// validate checks n: an IPv4 address and a gateway beside it in its
// prefix, the same in IPv6 if it has either, an MTU the kernel takes
// (for IPv6 too), and an Attach.
func (n *Network) validate() error {
	switch {
	case !n.Address.IsValid() || !n.Address.Addr().Is4() || n.Address.Bits() < 1 || n.Address.Bits() > 30:
		return fmt.Errorf("sandbox: network address %v: want an IPv4 address with a prefix of 1 to 30 bits", n.Address)
	case !n.Gateway.Is4() || !n.Address.Masked().Contains(n.Gateway) || n.Gateway == n.Address.Addr():
		return fmt.Errorf("sandbox: network gateway %v: want another IPv4 address of %v", n.Gateway, n.Address.Masked())
	case n.MTU != 0 && (n.MTU < 576 || n.MTU > 65535):
		return fmt.Errorf("sandbox: network MTU %d: want 576 to 65535", n.MTU)
	case n.Attach == nil:
		return errors.New("sandbox: network without Attach")
	case !n.hasIPv6():
		return nil
	}
	a := n.Address6.Addr()
	switch {
	case !n.Address6.IsValid() || !a.Is6() || a.Is4In6() || a.Zone() != "" || n.Address6.Bits() < 1 || n.Address6.Bits() > 126:
		return fmt.Errorf("sandbox: network IPv6 address %v: want an IPv6 address with a prefix of 1 to 126 bits", n.Address6)
	case !n.Gateway6.Is6() || n.Gateway6.Is4In6() || n.Gateway6.Zone() != "" || !n.Address6.Masked().Contains(n.Gateway6) || n.Gateway6 == a:
		return fmt.Errorf("sandbox: network IPv6 gateway %v: want another IPv6 address of %v", n.Gateway6, n.Address6.Masked())
	case n.MTU != 0 && n.MTU < 1280:
		return fmt.Errorf("sandbox: network MTU %d: IPv6 wants 1280 or more", n.MTU)
	}
	return nil
}

// hasIPv6 says whether n asks for IPv6 (validate: both its fields).
func (n *Network) hasIPv6() bool { return n.Address6.IsValid() || n.Gateway6.IsValid() }

// Mount makes a host path visible inside the sandbox.
type Mount struct {
	Source string // host path (file or directory)
	Target string // path inside; defaults to Source
	// Writable is for trusted preparation steps only (e.g. filling a
	// toolchain cache); untrusted code must never get a writable host path.
	Writable bool
	// Overlay gives the sandbox a private writable view of a read-only
	// Source: writes go to a tmpfs and vanish with the run.
	Overlay bool
	// Optional skips the mount when Source does not exist.
	Optional bool
	// Late binds Source when the run starts instead of when its sandbox
	// is built, for a source that changes from run to run (a live
	// sandbox's socket directory): specs that differ only in a Late
	// mount's Source can then use the same sandboxes built ahead
	// (Engine.Prewarm). Only a Detachable spec's sandbox, which serves one
	// run, binds it late; other specs bind it with the rest. A Late mount
	// is a read-only directory, and cannot be Writable, Overlay or
	// Optional.
	Late bool
}

// File is an input file placed under /work.
type File struct {
	Path string // relative, local path; parent directories are created
	Data []byte
	Mode fs.FileMode // permission bits; 0 means 0644
}

// Collect selects output files. Files are read only after every process of
// the run is dead, through descriptors that cannot leave /work; symlinks,
// FIFOs, devices and files over the size cap are skipped and listed.
type Collect struct {
	// Patterns are relative to /work ("*.txt", "out/*", "**/*.log"; see
	// MatchPattern: "**" spans directories); a pattern without a wildcard
	// names one file. Empty with All unset collects nothing.
	Patterns []string
	// All collects every regular file in /work.
	All bool
	// MaxFileBytes caps one file (default 8 MiB), MaxTotalBytes all of them
	// (default 32 MiB), MaxFiles their count (default 1000).
	MaxFileBytes, MaxTotalBytes int64
	MaxFiles                    int
}

// Limits bound a run. Zero fields take the value of DefaultLimits.
type Limits struct {
	WallTime    time.Duration // from program start to the end of the tree
	CPUTime     time.Duration // user+sys of the whole tree, enforced to the ms
	Memory      int64         // bytes, cgroup limit with swap off
	Processes   int           // tasks (processes and threads) at once
	CPUs        float64       // CPU bandwidth quota in cores
	OutputBytes int64         // per stream; past it the run is killed
	FileSize    int64         // largest file the program may write
	WorkSize    int64         // bytes of the /work tmpfs
	TmpSize     int64         // bytes of the /tmp tmpfs
	Inodes      int           // inodes of each of /work and /tmp
	OpenFiles   int           // RLIMIT_NOFILE
	Stack       int64         // RLIMIT_STACK bytes
	// Idle runs the program at the scheduler's idle priority (the cgroup's
	// cpu.idle): it gets CPU only when nothing else wants it, for work in
	// the background that no one waits for. A kernel without cpu.idle
	// (before 5.15) runs it as any other.
	Idle bool
}

// DefaultLimits are applied to every zero field of a Spec's Limits.
var DefaultLimits = Limits{
	WallTime:    30 * time.Second,
	CPUTime:     30 * time.Second,
	Memory:      256 << 20,
	Processes:   64,
	CPUs:        1,
	OutputBytes: 1 << 20,
	FileSize:    64 << 20,
	WorkSize:    64 << 20,
	TmpSize:     64 << 20,
	Inodes:      4096,
	OpenFiles:   256,
	Stack:       8 << 20,
}

// WithDefaults returns l with every zero field taken from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	pick := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	l.WallTime = time.Duration(pick(int64(l.WallTime), int64(d.WallTime)))
	l.CPUTime = time.Duration(pick(int64(l.CPUTime), int64(d.CPUTime)))
	l.Memory = pick(l.Memory, d.Memory)
	l.Processes = int(pick(int64(l.Processes), int64(d.Processes)))
	if l.CPUs <= 0 {
		l.CPUs = d.CPUs
	}
	l.OutputBytes = pick(l.OutputBytes, d.OutputBytes)
	l.FileSize = pick(l.FileSize, d.FileSize)
	l.WorkSize = pick(l.WorkSize, d.WorkSize)
	l.TmpSize = pick(l.TmpSize, d.TmpSize)
	l.Inodes = int(pick(int64(l.Inodes), int64(d.Inodes)))
	l.OpenFiles = int(pick(int64(l.OpenFiles), int64(d.OpenFiles)))
	l.Stack = pick(l.Stack, d.Stack)
	return l
}

// Limit names the limit that ended a run.
type Limit string

// The limits a run can hit. LimitNone means the program ended by itself.
const (
	LimitNone      Limit = ""
	LimitWallTime  Limit = "wall_time"
	LimitCPUTime   Limit = "cpu_time"
	LimitMemory    Limit = "memory"
	LimitProcesses Limit = "processes"
	LimitOutput    Limit = "output"
	LimitFileSize  Limit = "file_size"
	LimitDisk      Limit = "disk"
	LimitSeccomp   Limit = "seccomp"  // a forbidden system call killed the program
	LimitCanceled  Limit = "canceled" // the caller's context ended the run
)

// Result is what a run did. Times and memory are measured from the run's
// cgroup, so they cover every process of the tree.
type Result struct {
	ExitCode int    // exit status; -1 when killed by a signal
	Signal   string // e.g. "SIGKILL" when a signal ended the program
	Limit    Limit  // which limit ended the run, if any

	WallTime   time.Duration
	CPUTime    time.Duration // user + sys
	UserTime   time.Duration
	SysTime    time.Duration
	PeakMemory int64 // bytes

	Stdout, Stderr                   []byte
	StdoutTruncated, StderrTruncated bool
	// ResultData is what the program wrote to descriptor 3 (Spec.ResultPipe).
	ResultData      []byte
	ResultTruncated bool

	Files        []OutputFile
	SkippedFiles []SkippedFile
}

// OutputFile is a regular file read back from /work.
type OutputFile struct {
	Path string
	Data []byte
	Mode fs.FileMode
}

// SkippedFile is a file that matched Collect but was not returned.
type SkippedFile struct {
	Path   string
	Reason string
}

// SetupError means the sandbox could not be built; the program never ran.
type SetupError struct {
	Step string
	Err  error
}

func (e *SetupError) Error() string { return "sandbox setup: " + e.Step + ": " + e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// ErrBusy means every uid slot is in use: too many concurrent runs.
var ErrBusy = errors.New("sandbox: all sandbox uid slots are in use; too many concurrent runs")

// ErrRunEnded means the run is over: what needs it running (DialTCP) can
// no longer reach it.
var ErrRunEnded = errors.New("sandbox: the run has ended")

// ErrDetached means the run was handed on (Detach): the caller no longer
// holds it.
var ErrDetached = errors.New("sandbox: the run was detached")

// ErrUnsupported is returned on systems without the kernel features the
// sandbox needs; code is never run unsandboxed as a fallback.
var ErrUnsupported = errors.New("sandbox: not supported on this system")

// ValidatePath checks an input file name: relative, local, no NUL, bounded
// length and depth. It returns the cleaned path.
func ValidatePath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty file name")
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("file name %q contains NUL", p)
	case len(p) > 255:
		return "", fmt.Errorf("file name %.40q... longer than 255 bytes", p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("file name %q is absolute; names are relative to /work", p)
	}
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("file name %q is not valid UTF-8", p)
	}
	for _, r := range p {
		// Control characters (C0, DEL, C1) and bidirectional overrides make
		// names that display as something they are not.
		if unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return "", fmt.Errorf("file name %q contains a control or bidirectional-override character", p)
		}
	}
	clean := path.Clean(p)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("file name %q leaves /work", p)
	}
	if strings.Count(clean, "/") >= 16 {
		return "", fmt.Errorf("file name %q is nested deeper than 16 directories", p)
	}
	return clean, nil
}

// SystemMounts are the read-only host paths most programs need: the system
// directories (or, on merged-/usr hosts, their symlinks) and the dynamic
// linker's cache.
var SystemMounts = []Mount{
	{Source: "/usr"},
	{Source: "/bin", Optional: true},
	{Source: "/sbin", Optional: true},
	{Source: "/lib", Optional: true},
	{Source: "/lib64", Optional: true},
	{Source: "/etc/alternatives", Optional: true},
	{Source: "/etc/ld.so.cache", Optional: true},
	{Source: "/etc/localtime", Optional: true},
}

// Stats is what a running sandbox uses now: read on demand (a live
// sandbox's metrics), nothing sampled in the background.
type Stats struct {
	// CPU is its processes' CPU time so far, Memory their memory now
	// (page cache and tmpfs files included) and MemoryPeak its highest.
	CPU        int64 // nanoseconds
	Memory     int64
	MemoryPeak int64
	// Disk is what its /work and /tmp hold, DiskTotal their sizes.
	Disk, DiskTotal int64
}

// Detached is what a process needs to take over a run that was detached
// (Process.Detach, Adopted.Detach): the sandbox's PID 1 and its cgroups.
// It is meant to be kept as JSON until a process adopts it
// (Engine.Adopt), which must be on the same host and boot, with the same
// cgroup parent.
type Detached struct {
	// Pid is the host pid of the sandbox's PID 1; StartTime is its start
	// time (field 22 of /proc/<pid>/stat, clock ticks after boot) and
	// BootID the kernel's boot id: together they name that process and
	// never another that took the pid after it.
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	// UID is the host uid of PID 1; the program runs as UID+1. An engine
	// whose range has them gives them to no other run while it holds this
	// one.
	UID int `json:"uid"`
	// CgroupV2 tells the cgroup version. Sandbox maps "unified" (v2) or
	// each v1 controller to the sandbox's cgroup directory; Run maps them
	// to the run's, inside it.
	CgroupV2 bool              `json:"cgroup_v2"`
	Sandbox  map[string]string `json:"sandbox_cgroups"`
	Run      map[string]string `json:"run_cgroups"`
	// CPUBase (v1) is the CPU time, in nanoseconds, the sandbox's cpuacct
	// cgroup had counted when the program started: its PID 1's set-up.
	CPUBase int64 `json:"cpu_base_ns,omitempty"`
}

// Live is a running sandbox as its holder sees it: a started Process, or
// an Adopted one. (Their Wait methods differ: a Process's returns its
// Result.)
type Live interface {
	// Kill ends the run at once.
	Kill()
	// DialTCP connects to port on the loopback of the run's network.
	DialTCP(ctx context.Context, port int) (net.Conn, error)
	// Stats reads what the run uses now.
	Stats() (Stats, error)
	// Detach hands the run on: the holder lets it go.
	Detach() (*Detached, error)
}
