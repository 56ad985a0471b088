package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// The soak command runs a server under mixed load for a while and checks
// that every answer was right and that the server gave back everything it
// took: processes, cgroups, mounts, temporary files, descriptors, memory.

const soakUsage = `Usage: sandbox-run soak [-duration 3m] [-concurrency 0] [-url URL] [-api-key KEY] [-warmup 0] [--output-format text|json]

Runs a server under mixed load for -duration, at -concurrency requests in
flight (0: twice the server's workers). Benign programs in the eight core
languages (python, javascript, go, rust, java, bash, c, cpp) each print
values derived from a per-request nonce, given as stdin or as an argument,
and every result is checked byte for byte (stdout, status completed, exit
code 0, no stderr). About 30% of the requests are attacks, each with its
expected status and limit_reason checked: fork bombs (processes), memory
bombs (memory), output floods (output, truncated at the cap), sleepers
past a 1 s timeout (timeout) and CPU burns under cpu_time_seconds 0.5
(cpu_time; their 30 s timeout leaves the CPU limit to end them even
when a busy machine gives the sandboxes a small share of its CPUs). A few
percent of the benign requests go as async jobs, polled to their result,
and a few as Server-Sent Events streams, whose streamed
output must equal the result's. 429 and 503 answers are retried after
their Retry-After and counted, not failed. Every request must be answered:
lost = sent - answered - transport errors.

Without -url the server runs in this process on 127.0.0.1:0, configured
like "sandbox-run serve" (SANDBOX_RUN_* variables apply), with a private
data dir (its toolchain cache is the configured data dir's) and a private
TMPDIR, both removed at the end. The warm-up (-warmup, 0: 10% of the
duration up to 15 s, and until every kind of request has succeeded once)
ends with a pause until nothing is in flight, when the server's RSS (after
runtime.GC and debug.FreeOSMemory), open descriptors and goroutines are
recorded. At the end, once everything has drained, they must be back: RSS
within 10% (RSS less the free heap pages the Go runtime keeps even then;
the raw RSS is reported too), descriptors not above, goroutines at most 5
above; and no run cgroup of this process, no process with a sandbox uid
descended from it, no new mount (but those in other programs' directories
under /tmp), nothing left in its data dir or TMPDIR, and no new entry in
the host's /tmp that it could have made: one owned by a sandbox uid, or
one named as a toolchain's leftover (.config, hsperfdata_root). Other
programs' entries in /tmp are not counted (nothing tells who created
them); the server's own temporary files all go to its private TMPDIR,
where every entry counts.

With -url it drives a running server (its base URL, e.g.
http://127.0.0.1:8080) and checks only the results and /readyz.

Exit status: 0 when every check passed, 1 when any failed, 2 for usage
errors, 125 when the server could not be started.

Flags:
`

// soakOptions are the soak command's flags.
type soakOptions struct {
	duration, warmup time.Duration
	concurrency      int
	url, key, format string
}

func cmdSoak(args []string) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), soakUsage)
		fs.PrintDefaults()
	}
	var o soakOptions
	fs.DurationVar(&o.duration, "duration", 3*time.Minute, "how long the load runs")
	fs.DurationVar(&o.warmup, "warmup", 0, "warm-up before the baseline (0: 10% of -duration, at most 15s)")
	fs.IntVar(&o.concurrency, "concurrency", 0, "requests in flight (0: twice the server's workers)")
	fs.StringVar(&o.url, "url", "", "base URL of a running server (default: serve in this process)")
	fs.StringVar(&o.key, "api-key", os.Getenv("SANDBOX_RUN_API_KEY"), "with -url: API key sent as a Bearer token")
	fs.StringVar(&o.format, "output-format", "text", "output format: text or json")
	fs.StringVar(&o.format, "o", "text", "shorthand for --output-format")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	switch {
	case o.format != "text" && o.format != "json":
		return fatalf(exitUsage, "--output-format must be text or json, not %q", o.format)
	case fs.NArg() > 0:
		return fatalf(exitUsage, "soak: no arguments expected, got %q", fs.Args())
	case o.duration <= 0 || o.warmup < 0 || o.concurrency < 0 || o.concurrency > 1024:
		return fatalf(exitUsage, "soak: -duration must be positive, -warmup not negative, -concurrency from 0 to 1024")
	case o.warmup >= o.duration:
		return fatalf(exitUsage, "soak: -warmup must be shorter than -duration")
	}
	if o.url != "" {
		o.url = strings.TrimSuffix(strings.TrimRight(o.url, "/"), "/api/sandbox/execute")
		if !strings.HasPrefix(o.url, "http://") && !strings.HasPrefix(o.url, "https://") {
			return fatalf(exitUsage, "soak: -url must be an http:// or https:// URL, not %q", o.url)
		}
	}
	if o.warmup == 0 {
		o.warmup = min(o.duration/10, 15*time.Second)
	}
	return runSoak(&o)
}

// ---- The load: programs and what they must do.

// soakLanguages are the eight core languages, each with a program that
// prints soakExpected of the nonce it gets as its first argument or, when
// it has none, on stdin.
var soakLanguages = []struct{ name, code string }{
	{"python", `import sys
s = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
n = int(s.strip())
out = ["python %d %d" % (n, (n * 31 + 7) % 1000003)]
for i in range(1, n % 7 + 2):
    out.append("%d %d" % (i, (n + i * i) % 1009))
print("\n".join(out))
`},
	{"javascript", `const s = process.argv.length > 2 ? process.argv[2] : require("fs").readFileSync(0, "utf8");
const n = parseInt(s.trim(), 10);
const out = ["javascript " + n + " " + (n * 31 + 7) % 1000003];
for (let i = 1; i <= n % 7 + 1; i++) out.push(i + " " + (n + i * i) % 1009);
process.stdout.write(out.join("\n") + "\n");
`},
	{"go", `package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	s := ""
	if len(os.Args) > 1 {
		s = os.Args[1]
	} else {
		b, _ := io.ReadAll(os.Stdin)
		s = string(b)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("go %d %d\n", n, (n*31+7)%1000003)
	for i := int64(1); i <= n%7+1; i++ {
		fmt.Printf("%d %d\n", i, (n+i*i)%1009)
	}
}
`},
	{"rust", `use std::io::Read;

fn main() {
    let mut s = String::new();
    match std::env::args().nth(1) {
        Some(a) => s = a,
        None => {
            std::io::stdin().read_to_string(&mut s).unwrap();
        }
    }
    let n: i64 = s.trim().parse().unwrap();
    let mut out = format!("rust {} {}\n", n, (n * 31 + 7) % 1000003);
    for i in 1..=(n % 7 + 1) {
        out.push_str(&format!("{} {}\n", i, (n + i * i) % 1009));
    }
    print!("{}", out);
}
`},
	{"java", `import java.io.IOException;

public class Main {
    public static void main(String[] args) throws IOException {
        String s = args.length > 0 ? args[0] : new String(System.in.readAllBytes(), "UTF-8");
        long n = Long.parseLong(s.trim());
        StringBuilder b = new StringBuilder();
        b.append("java ").append(n).append(' ').append((n * 31 + 7) % 1000003).append('\n');
        for (long i = 1; i <= n % 7 + 1; i++) {
            b.append(i).append(' ').append((n + i * i) % 1009).append('\n');
        }
        System.out.print(b);
        System.out.flush();
    }
}
`},
	{"bash", `if [ $# -gt 0 ]; then s=$1; else read -r s; fi
n=$((s))
echo "bash $n $(( (n * 31 + 7) % 1000003 ))"
for ((i = 1; i <= n % 7 + 1; i++)); do
	echo "$i $(( (n + i * i) % 1009 ))"
done
`},
	{"c", `#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	char buf[64] = {0};
	const char *s = argc > 1 ? argv[1] : (fgets(buf, sizeof buf, stdin) ? buf : "");
	long long n = strtoll(s, NULL, 10);
	printf("c %lld %lld\n", n, (n * 31 + 7) % 1000003);
	for (long long i = 1; i <= n % 7 + 1; i++)
		printf("%lld %lld\n", i, (n + i * i) % 1009);
	return 0;
}
`},
	{"cpp", `#include <iostream>
#include <string>

int main(int argc, char **argv) {
	std::string s;
	if (argc > 1) s = argv[1]; else std::getline(std::cin, s);
	long long n = std::stoll(s);
	std::cout << "cpp " << n << ' ' << (n * 31 + 7) % 1000003 << '\n';
	for (long long i = 1; i <= n % 7 + 1; i++)
		std::cout << i << ' ' << (n + i * i) % 1009 << '\n';
	return 0;
}
`},
}

// soakExpected is what the benign program of lang prints for nonce n.
func soakExpected(lang string, n int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %d\n", lang, n, (n*31+7)%1000003)
	for i := int64(1); i <= n%7+1; i++ {
		fmt.Fprintf(&b, "%d %d\n", i, (n+i*i)%1009)
	}
	return b.String()
}

// soakAttack is one hostile program (after the red team's in
// test/redteam/testdata/programs/resources, with the nonce, its first
// argument, in what it prints) and the outcome it must end in.
type soakAttack struct {
	language, code string
	// Limits of the request (zero: the server's default).
	timeout, cpu float64
	memoryMB     int64
	processes    int
	output       int64
	// The outcome: status, limit_reason and signal (when not empty), the
	// exact stdout and stderr (when not nil), which stream is marked
	// truncated ("" none), and a bound on cpu_time_ms (0 none).
	status, limit, signal string
	stdout, stderr        func(n string) string
	truncated             string
	maxCPUms              float64
}

func soakLine(format string) func(string) string {
	return func(n string) string { return fmt.Sprintf(format, n) }
}

// soakFlood is the first limit bytes of line repeated.
func soakFlood(format string, limit int64) func(string) string {
	return func(n string) string {
		line := fmt.Sprintf(format, n)
		return strings.Repeat(line, int(limit)/len(line)+1)[:limit]
	}
}

func soakEmpty(string) string { return "" }

// soakAttacks are the attack kinds and their variants.
var soakAttacks = []struct {
	kind     string
	variants []soakAttack
}{
	{"attack/fork-bomb", []soakAttack{
		{language: "bash", code: "echo \"bomb $1\"\n:(){ :|:& };:\nsleep 1\n", processes: 32, timeout: 3,
			status: "error_runtime", limit: "processes", stdout: soakLine("bomb %s\n")},
		{language: "c", code: `#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
	printf("bomb %s\n", argc > 1 ? argv[1] : "");
	fflush(stdout);
	for (;;)
		fork();
}
`, processes: 32, timeout: 1, status: "error_runtime", limit: "processes", stdout: soakLine("bomb %s\n")},
		{language: "python", code: `import errno, os, sys, time
me = os.getpid()
refused = 0
deadline = time.monotonic() + 1.0
while time.monotonic() < deadline:
    try:
        os.fork()
    except OSError as e:
        if e.errno == errno.EAGAIN and os.getpid() == me:
            refused += 1
if os.getpid() == me:
    print("EAGAIN", refused > 0, sys.argv[1], flush=True)
    os._exit(0)
while True:
    time.sleep(60)
`, processes: 16, timeout: 5, status: "error_runtime", limit: "processes", stdout: soakLine("EAGAIN True %s\n")},
	}},
	{"attack/memory-bomb", []soakAttack{
		{language: "c", code: `#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
	printf("bomb %s\n", argc > 1 ? argv[1] : "");
	fflush(stdout);
	for (;;) {
		char *p = malloc(1 << 20);
		if (!p) {
			puts("malloc failed");
			return 3;
		}
		memset(p, 0x5a, 1 << 20);
	}
}
`, memoryMB: 32, timeout: 10, status: "error_runtime", limit: "memory", signal: "SIGKILL", stdout: soakLine("bomb %s\n")},
		{language: "python", code: `import sys
print("bomb", sys.argv[1], flush=True)
hog = []
while True:
    hog.append(bytearray(b"\x5a" * (1 << 20)))
`, memoryMB: 48, timeout: 10, status: "error_runtime", limit: "memory", signal: "SIGKILL", stdout: soakLine("bomb %s\n")},
	}},
	{"attack/output-flood", []soakAttack{
		{language: "bash", code: "yes \"flood $1\"\n", output: 100000, timeout: 10,
			status: "error_runtime", limit: "output", stdout: soakFlood("flood %s\n", 100000), truncated: "stdout"},
		{language: "c", code: `#include <stdio.h>

int main(int argc, char **argv) {
	for (;;)
		printf("A%s\n", argv[1]);
}
`, output: 65536, timeout: 10, status: "error_runtime", limit: "output", stdout: soakFlood("A%s\n", 65536), truncated: "stdout"},
		{language: "python", code: `import sys
line = "E" + sys.argv[1] + "\n"
while True:
    sys.stderr.write(line * 100)
`, output: 50000, timeout: 10, status: "error_runtime", limit: "output", stdout: soakEmpty, stderr: soakFlood("E%s\n", 50000), truncated: "stderr"},
	}},
	{"attack/sleeper", []soakAttack{
		{language: "python", code: `import os, sys, time
print("sleeping", sys.argv[1], flush=True)
if os.fork() == 0:
    time.sleep(600)
    os._exit(0)
time.sleep(600)
`, timeout: 1, status: "timeout", limit: "wall_time", stdout: soakLine("sleeping %s\n")},
		{language: "bash", code: "echo \"sleeping $1\"\nsleep 600 &\nsleep 600\n", timeout: 1,
			status: "timeout", limit: "wall_time", stdout: soakLine("sleeping %s\n")},
	}},
	{"attack/cpu-burn", []soakAttack{
		{language: "python", code: `import sys
print("burning", sys.argv[1], flush=True)
x = 0
while True:
    x = (x * 31 + 7) & 0xFFFFFFFF
`, cpu: 0.5, timeout: 30, status: "timeout", limit: "cpu_time", stdout: soakLine("burning %s\n"), maxCPUms: 600},
		{language: "c", code: `#include <stdio.h>

int main(int argc, char **argv) {
	printf("burning %s\n", argv[1]);
	fflush(stdout);
	volatile unsigned long x = 0;
	for (;;)
		x = x * 31 + 7;
}
`, cpu: 0.5, timeout: 30, status: "timeout", limit: "cpu_time", stdout: soakLine("burning %s\n"), maxCPUms: 600},
		{language: "javascript", code: `console.log("burning " + process.argv[2]);
let x = 0;
for (;;) x = (x * 31 + 7) >>> 0;
`, cpu: 0.5, timeout: 30, status: "timeout", limit: "cpu_time", stdout: soakLine("burning %s\n"), maxCPUms: 600},
	}},
}

// Request modes.
const (
	soakSync = iota
	soakAsync
	soakSSE
)

// soakKind is one row of the report: a kind of request and its tally.
type soakKind struct {
	name    string
	mode    int
	lang    int // benign sync: index in soakLanguages; -1 any
	attack  int // attacks: index in soakAttacks; -1 none
	perTurn int // how many of each scheduling cycle

	// lost is what is left of sent: sent - ok - errs - mismatches - transport.
	mu                                             sync.Mutex
	sent, ok, retried, errs, mismatches, transport int
	lat                                            []time.Duration
}

func soakKinds() []*soakKind {
	var ks []*soakKind
	for i, l := range soakLanguages {
		ks = append(ks, &soakKind{name: "benign/" + l.name, mode: soakSync, lang: i, attack: -1, perTurn: 4})
	}
	ks = append(ks,
		&soakKind{name: "async (benign, any language)", mode: soakAsync, lang: -1, attack: -1, perTurn: 2},
		&soakKind{name: "sse (benign, any language)", mode: soakSSE, lang: -1, attack: -1, perTurn: 2})
	for i, a := range soakAttacks {
		ks = append(ks, &soakKind{name: a.kind, mode: soakSync, lang: -1, attack: i, perTurn: 3})
	}
	return ks
}

// ---- The runner.

// Outcomes of one request.
const (
	soakOK = iota
	soakMismatch
	soakError
	soakTransport
	soakLost
)

type soakRunner struct {
	base, key string
	hc        *http.Client
	kinds     []*soakKind

	mu       sync.Mutex
	rng      *rand.Rand
	cycle    []int
	failures []string
	nfail    int
	// cpuKilled: the CPU time of each attack ended by its CPU limit, by
	// language, for the report's precision line.
	cpuKilled map[string][]float64

	// The gate: workers enter before each request and leave after it;
	// pause holds them at the gate, stop sends them home.
	gate     sync.Mutex
	cond     *sync.Cond
	paused   bool
	stopping bool
	inflight int
	workers  int
}

// next picks the kind of the next request: a shuffled cycle in which each
// kind has its perTurn places, so that every kind comes early and often.
func (r *soakRunner) next() *soakKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cycle) == 0 {
		for i, k := range r.kinds {
			for range k.perTurn {
				r.cycle = append(r.cycle, i)
			}
		}
		r.rng.Shuffle(len(r.cycle), func(i, j int) { r.cycle[i], r.cycle[j] = r.cycle[j], r.cycle[i] })
	}
	k := r.kinds[r.cycle[0]]
	r.cycle = r.cycle[1:]
	return k
}

func (r *soakRunner) enter() bool {
	r.gate.Lock()
	defer r.gate.Unlock()
	for r.paused && !r.stopping {
		r.cond.Wait()
	}
	if r.stopping {
		return false
	}
	r.inflight++
	return true
}

func (r *soakRunner) leave() {
	r.gate.Lock()
	r.inflight--
	r.cond.Broadcast()
	r.gate.Unlock()
}

// drain holds new requests at the gate (or, with stop, ends the workers)
// and waits up to d for those in flight; it returns how many still are.
func (r *soakRunner) drain(stop bool, d time.Duration) int {
	t := time.AfterFunc(d, func() {
		r.gate.Lock()
		r.cond.Broadcast()
		r.gate.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(d)
	r.gate.Lock()
	defer r.gate.Unlock()
	r.paused = true
	r.stopping = r.stopping || stop
	r.cond.Broadcast()
	for r.inflight > 0 && time.Now().Before(deadline) {
		r.cond.Wait()
	}
	return r.inflight
}

func (r *soakRunner) resume() {
	r.gate.Lock()
	r.paused = false
	r.cond.Broadcast()
	r.gate.Unlock()
}

func (r *soakRunner) worker(seed uint64) {
	defer func() {
		r.gate.Lock()
		r.workers--
		r.gate.Unlock()
	}()
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	for r.enter() {
		r.one(r.next(), rng)
		r.leave()
	}
}

// record counts one request's outcome.
func (r *soakRunner) record(k *soakKind, outcome int, lat time.Duration, id, detail string) {
	k.mu.Lock()
	switch outcome {
	case soakOK:
		k.ok++
	case soakMismatch:
		k.mismatches++
	case soakError:
		k.errs++
	case soakTransport:
		k.transport++
	}
	if outcome == soakOK || outcome == soakMismatch {
		k.lat = append(k.lat, lat)
	}
	k.mu.Unlock()
	if outcome != soakOK {
		r.mu.Lock()
		r.nfail++
		if len(r.failures) < 20 {
			if id != "" {
				id = " " + id
			}
			r.failures = append(r.failures, fmt.Sprintf("%s%s: %s", k.name, id, detail))
		}
		r.mu.Unlock()
	}
}

// one sends one request of kind k and checks its answer.
func (r *soakRunner) one(k *soakKind, rng *rand.Rand) {
	nonce := rng.Int64N(1<<31-2) + 1
	n := strconv.FormatInt(nonce, 10)
	var req api.ExecuteRequest
	var check func(res *executor.Result) []string
	deadline := 3 * time.Minute
	if k.attack >= 0 {
		vs := soakAttacks[k.attack].variants
		a := vs[rng.IntN(len(vs))]
		req = api.ExecuteRequest{Language: a.language, Code: a.code, Args: []string{n},
			Limits: api.Limits{TimeoutSeconds: a.timeout, CPUTimeSeconds: a.cpu, MaxMemoryMB: a.memoryMB, MaxProcesses: a.processes, MaxOutputBytes: a.output}}
		check = func(res *executor.Result) []string {
			if a.cpu > 0 && res.LimitReason == "cpu_time" {
				r.mu.Lock()
				r.cpuKilled[a.language] = append(r.cpuKilled[a.language], res.CPUTimeMs)
				r.mu.Unlock()
			}
			return soakCheckAttack(res, &a, n)
		}
		deadline = 2 * time.Minute
	} else {
		li := k.lang
		if li < 0 {
			li = rng.IntN(len(soakLanguages))
		}
		l := soakLanguages[li]
		req = api.ExecuteRequest{Language: l.name, Code: l.code, Limits: api.Limits{TimeoutSeconds: 30}}
		via := "stdin"
		if rng.IntN(2) == 0 {
			req.Args = []string{n}
			via = "args"
		} else {
			req.InputData = n + "\n"
		}
		want := soakExpected(l.name, nonce)
		check = func(res *executor.Result) []string {
			d := soakCheckBenign(res, l.name, want)
			for i := range d {
				d[i] += " (" + l.name + ", nonce via " + via + ")"
			}
			return d
		}
	}
	body, err := json.Marshal(&req)
	if err != nil {
		panic(err) // a request built here always encodes
	}
	k.mu.Lock()
	k.sent++
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	var (
		res      *executor.Result
		outcome  int
		detail   string
		streamed []string
	)
	switch k.mode {
	case soakAsync:
		res, outcome, detail = r.async(ctx, k, body)
	case soakSSE:
		res, streamed, outcome, detail = r.sse(ctx, k, body)
	default:
		res, outcome, detail = r.sync(ctx, k, body)
	}
	lat := time.Since(start)
	if outcome == soakTransport && ctx.Err() != nil {
		outcome, detail = soakLost, fmt.Sprintf("no answer within %s: %s", deadline, detail)
	}
	id := ""
	if res != nil {
		id = res.ExecutionID
		if diffs := append(streamed, check(res)...); len(diffs) > 0 {
			outcome, detail = soakMismatch, strings.Join(diffs, "; ")
		}
	}
	r.record(k, outcome, lat, id, detail)
}

// post sends body to path, retrying 429 and 503 after their Retry-After
// until ctx ends.
func (r *soakRunner) post(ctx context.Context, k *soakKind, path string, body []byte, accept string) (*http.Response, error) {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := r.do(req)
		if err != nil {
			return nil, err
		}
		if !r.retry(ctx, k, resp) {
			return resp, nil
		}
	}
}

func (r *soakRunner) do(req *http.Request) (*http.Response, error) {
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	return r.hc.Do(req)
}

// retry says whether resp is a 429 or 503 to retry; if so it has closed
// the response and waited its Retry-After (at most 10 s).
func (r *soakRunner) retry(ctx context.Context, k *soakKind, resp *http.Response) bool {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	k.mu.Lock()
	k.retried++
	k.mu.Unlock()
	wait := time.Second
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 {
		wait = time.Duration(min(s, 10)) * time.Second
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
	}
	return true
}

// answer reads a whole answer that must be want and decodes its result.
func soakAnswer(resp *http.Response, want int) (*executor.Result, int, string) {
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, soakTransport, "reading the answer: " + err.Error()
	}
	if resp.StatusCode != want {
		return nil, soakError, fmt.Sprintf("HTTP %d: %.300s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var res executor.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, soakError, fmt.Sprintf("undecodable answer (%v): %.300s", err, b)
	}
	return &res, soakOK, ""
}

func (r *soakRunner) sync(ctx context.Context, k *soakKind, body []byte) (*executor.Result, int, string) {
	resp, err := r.post(ctx, k, "/api/sandbox/execute", body, "")
	if err != nil {
		return nil, soakTransport, err.Error()
	}
	return soakAnswer(resp, http.StatusOK)
}

// async submits a job and polls it (long polls of 10 s) to its result.
func (r *soakRunner) async(ctx context.Context, k *soakKind, body []byte) (*executor.Result, int, string) {
	resp, err := r.post(ctx, k, "/api/sandbox/executions", body, "")
	if err != nil {
		return nil, soakTransport, err.Error()
	}
	job, outcome, detail := soakAnswer(resp, http.StatusAccepted)
	if outcome != soakOK {
		return nil, outcome, "submit: " + detail
	}
	if job.Status != "queued" || job.ExecutionID == "" {
		return nil, soakError, fmt.Sprintf("submit answered status %q, id %q", job.Status, job.ExecutionID)
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/api/sandbox/executions/"+job.ExecutionID+"?wait=true&timeout=10", nil)
		if err != nil {
			return nil, soakError, err.Error()
		}
		resp, err := r.do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, soakLost, fmt.Sprintf("job %s: no result in time (%v)", job.ExecutionID, err)
			}
			return nil, soakTransport, err.Error()
		}
		if r.retry(ctx, k, resp) {
			continue
		}
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return nil, soakLost, "job " + job.ExecutionID + " vanished (404)"
		}
		res, outcome, detail := soakAnswer(resp, http.StatusOK)
		if outcome != soakOK {
			return nil, outcome, "job " + job.ExecutionID + ": " + detail
		}
		if res.Status != "queued" && res.Status != "running" {
			if res.ExecutionID != job.ExecutionID {
				return nil, soakError, fmt.Sprintf("job %s answered with the result of %s", job.ExecutionID, res.ExecutionID)
			}
			return res, soakOK, ""
		}
		if ctx.Err() != nil {
			return nil, soakLost, fmt.Sprintf("job %s still %s at the deadline", job.ExecutionID, res.Status)
		}
	}
}

// sse runs a streamed request and returns its result event, with the
// differences between the streamed output and the result's.
func (r *soakRunner) sse(ctx context.Context, k *soakKind, body []byte) (*executor.Result, []string, int, string) {
	resp, err := r.post(ctx, k, "/api/sandbox/execute", body, "text/event-stream")
	if err != nil {
		return nil, nil, soakTransport, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, nil, soakError, fmt.Sprintf("HTTP %d %s: %.300s", resp.StatusCode, resp.Header.Get("Content-Type"), bytes.TrimSpace(b))
	}
	streams := map[string]*bytes.Buffer{"stdout": {}, "stderr": {}, "compile": {}}
	var diffs []string
	br := bufio.NewReader(resp.Body)
	event, data := "", ""
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, nil, soakTransport, fmt.Sprintf("stream ended without a result event: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, ":"):
			continue
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			continue
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
			continue
		case line != "":
			diffs = append(diffs, fmt.Sprintf("unexpected stream line %.80q", line))
			continue
		}
		// A blank line ends an event.
		ev, payload := event, data
		event, data = "", ""
		switch ev {
		case "":
		case "stdout", "stderr", "compile":
			var e api.Event
			if err := json.Unmarshal([]byte(payload), &e); err != nil {
				diffs = append(diffs, fmt.Sprintf("undecodable %s event: %v", ev, err))
				continue
			}
			chunk := []byte(e.Data)
			if e.Encoding == "base64" {
				if chunk, err = base64.StdEncoding.DecodeString(e.Data); err != nil {
					diffs = append(diffs, fmt.Sprintf("%s event: bad base64: %v", ev, err))
					continue
				}
			}
			if buf := streams[ev]; e.Offset != int64(buf.Len()) {
				diffs = append(diffs, fmt.Sprintf("%s event at offset %d after %d bytes", ev, e.Offset, buf.Len()))
			}
			streams[ev].Write(chunk)
		case "result":
			var res executor.Result
			if err := json.Unmarshal([]byte(payload), &res); err != nil {
				return nil, nil, soakError, fmt.Sprintf("undecodable result event (%v): %.300s", err, payload)
			}
			io.Copy(io.Discard, resp.Body)
			for _, s := range []struct {
				name, text, enc string
			}{{"stdout", res.Stdout, res.StdoutEncoding}, {"stderr", res.Stderr, res.StderrEncoding}} {
				got := streams[s.name].String()
				if s.enc == "" && got != s.text {
					diffs = append(diffs, fmt.Sprintf("streamed %s %.80q differs from the result's %.80q", s.name, got, s.text))
				}
			}
			return &res, diffs, soakOK, ""
		case "error":
			return nil, nil, soakError, "error event: " + payload
		default:
			diffs = append(diffs, "unknown event "+ev)
		}
	}
}

// soakCheckBenign lists how a benign program's result differs from what
// it must be.
func soakCheckBenign(res *executor.Result, lang, want string) []string {
	var d []string
	if res.Status != executor.StatusCompleted || res.ExitCode != 0 || res.LimitReason != "" {
		d = append(d, fmt.Sprintf("status %s, exit code %d, limit %q (want completed, 0); stderr %.200q, error %.200q, compile %s",
			res.Status, res.ExitCode, res.LimitReason, res.Stderr, res.Error, soakCompile(res)))
	}
	if res.Stdout != want || res.StdoutEncoding != "" || res.StdoutTruncated {
		d = append(d, fmt.Sprintf("stdout %.200q (encoding %q, truncated %v), want %.200q", res.Stdout, res.StdoutEncoding, res.StdoutTruncated, want))
	}
	if res.Stderr != "" {
		d = append(d, fmt.Sprintf("stderr %.200q, want none", res.Stderr))
	}
	if res.Language != lang {
		d = append(d, fmt.Sprintf("language %q, want %q", res.Language, lang))
	}
	return d
}

func soakCompile(res *executor.Result) string {
	if res.Compile == nil {
		return "none"
	}
	return fmt.Sprintf("%s (%.200q)", res.Compile.Status, res.Compile.Stderr)
}

// soakCheckAttack lists how an attack's result differs from its outcome.
func soakCheckAttack(res *executor.Result, a *soakAttack, n string) []string {
	var d []string
	if string(res.Status) != a.status || res.LimitReason != a.limit {
		d = append(d, fmt.Sprintf("%s attack: status %s, limit %q (want %s, %q); exit code %d, signal %q, stderr %.200q, compile %s",
			a.language, res.Status, res.LimitReason, a.status, a.limit, res.ExitCode, res.Signal, res.Stderr, soakCompile(res)))
	}
	if a.signal != "" && res.Signal != a.signal {
		d = append(d, fmt.Sprintf("%s attack: signal %q, want %q", a.language, res.Signal, a.signal))
	}
	for _, s := range []struct {
		name, got, enc string
		truncated      bool
		want           func(string) string
	}{{"stdout", res.Stdout, res.StdoutEncoding, res.StdoutTruncated, a.stdout}, {"stderr", res.Stderr, res.StderrEncoding, res.StderrTruncated, a.stderr}} {
		if s.want != nil {
			if want := s.want(n); s.got != want || s.enc != "" {
				d = append(d, fmt.Sprintf("%s attack: %s of %d bytes %.120q (encoding %q), want %d bytes %.120q", a.language, s.name, len(s.got), s.got, s.enc, len(want), want))
			}
		}
		if s.truncated != (a.truncated == s.name) {
			d = append(d, fmt.Sprintf("%s attack: %s truncated %v", a.language, s.name, s.truncated))
		}
	}
	if a.maxCPUms > 0 && res.CPUTimeMs > a.maxCPUms {
		d = append(d, fmt.Sprintf("%s attack: cpu_time_ms %.1f over %.0f under a %gs CPU limit", a.language, res.CPUTimeMs, a.maxCPUms, a.cpu))
	}
	return d
}

// ---- The report.

// soakRow is one kind of request in the report.
type soakRow struct {
	Kind       string  `json:"kind"`
	Sent       int     `json:"sent"`
	OK         int     `json:"ok"`
	Retried    int     `json:"retried_429_503"`
	Errors     int     `json:"errors"`
	Mismatches int     `json:"mismatches"`
	Transport  int     `json:"transport_errors"`
	Lost       int     `json:"lost"`
	P50        float64 `json:"p50_ms"`
	P95        float64 `json:"p95_ms"`
	Max        float64 `json:"max_ms"`
}

// soakResources are the server's own resources, at the baseline (after
// the warm-up, nothing in flight) and at the end.
type soakResources struct {
	RSSBaselineKiB int64   `json:"rss_baseline_kib"`
	RSSEndKiB      int64   `json:"rss_end_kib"`
	RSSGrowthPct   float64 `json:"rss_growth_pct"`
	// Net is RSS less the heap pages the Go runtime holds free and did not
	// return to the OS when forced to: what the memory check compares.
	NetBaselineKiB   int64      `json:"rss_net_baseline_kib"`
	NetEndKiB        int64      `json:"rss_net_end_kib"`
	NetGrowthPct     float64    `json:"rss_net_growth_pct"`
	MemBaseline      soakMemory `json:"memory_baseline"`
	MemEnd           soakMemory `json:"memory_end"`
	FDsBaseline      int        `json:"fds_baseline"`
	FDsEnd           int        `json:"fds_end"`
	NewFDs           []string   `json:"new_fds,omitempty"`
	GoroutinesBase   int        `json:"goroutines_baseline"`
	GoroutinesEnd    int        `json:"goroutines_end"`
	RunCgroups       []string   `json:"run_cgroups,omitempty"`
	OtherCgroups     int        `json:"other_engines_run_cgroups"`
	SandboxProcs     []string   `json:"sandbox_processes,omitempty"`
	OtherSandboxProc int        `json:"other_sandbox_processes"`
	NewMounts        []string   `json:"new_mounts,omitempty"`
	TmpLeft          []string   `json:"tmp_entries_left,omitempty"`
	PrivateLeft      []string   `json:"private_dirs_left,omitempty"`
}

type soakCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type soakReport struct {
	Host        map[string]string `json:"host"`
	Server      string            `json:"server"`
	URL         string            `json:"url"`
	DurationS   float64           `json:"duration_s"`
	WarmupS     float64           `json:"warmup_s"`
	Concurrency int               `json:"concurrency"`
	Workers     int               `json:"server_workers"`
	Kinds       []soakRow         `json:"kinds"`
	Total       soakRow           `json:"total"`
	CPUKills    []soakCPUKill     `json:"cpu_limit_kills,omitempty"`
	Resources   *soakResources    `json:"resources,omitempty"`
	ServerLog   []string          `json:"server_warnings,omitempty"`
	Checks      []soakCheck       `json:"checks"`
	Failures    []string          `json:"failures,omitempty"`
	Notes       []string          `json:"notes,omitempty"`
	Passed      bool              `json:"passed"`
}

// soakCPUKill is how close to their CPU limit the CPU burners of one
// language were stopped: the CPU-time watchdog's precision under load.
type soakCPUKill struct {
	Language string  `json:"language"`
	Runs     int     `json:"runs"`
	P50      float64 `json:"p50_cpu_ms"`
	Max      float64 `json:"max_cpu_ms"`
}

// cpuKills summarizes cpuKilled, by language.
func (r *soakRunner) cpuKills() []soakCPUKill {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []soakCPUKill
	for _, lang := range slices.Sorted(maps.Keys(r.cpuKilled)) {
		v := slices.Sorted(slices.Values(r.cpuKilled[lang]))
		out = append(out, soakCPUKill{Language: lang, Runs: len(v), P50: v[len(v)/2], Max: v[len(v)-1]})
	}
	return out
}

func (rep *soakReport) check(name string, ok bool, format string, a ...any) {
	rep.Checks = append(rep.Checks, soakCheck{Check: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
}

func (r *soakRunner) rows() (rows []soakRow, total soakRow) {
	total.Kind = "total"
	var all []time.Duration
	for _, k := range r.kinds {
		k.mu.Lock()
		row := soakRow{Kind: k.name, Sent: k.sent, OK: k.ok, Retried: k.retried, Errors: k.errs, Mismatches: k.mismatches, Transport: k.transport}
		row.Lost = k.sent - k.ok - k.errs - k.mismatches - k.transport
		lat := slices.Clone(k.lat)
		k.mu.Unlock()
		if len(lat) > 0 {
			slices.Sort(lat)
			row.P50, row.P95, row.Max = benchMS(benchPercentile(lat, 50)), benchMS(benchPercentile(lat, 95)), benchMS(lat[len(lat)-1])
		}
		all = append(all, lat...)
		rows = append(rows, row)
		total.Sent += row.Sent
		total.OK += row.OK
		total.Retried += row.Retried
		total.Errors += row.Errors
		total.Mismatches += row.Mismatches
		total.Transport += row.Transport
		total.Lost += row.Lost
	}
	if len(all) > 0 {
		slices.Sort(all)
		total.P50, total.P95, total.Max = benchMS(benchPercentile(all, 50)), benchMS(benchPercentile(all, 95)), benchMS(all[len(all)-1])
	}
	return rows, total
}

func printSoak(w io.Writer, rep *soakReport) {
	printBenchHost(w, rep.Host)
	fmt.Fprintf(w, "server: %s\n", rep.Server)
	fmt.Fprintf(w, "load: %gs (warm-up %.1fs), %d in flight (server workers %d)\n\n", rep.DurationS, rep.WarmupS, rep.Concurrency, rep.Workers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tsent\tok\tretried 429/503\terrors\tmismatches\ttransport\tlost\tp50 ms\tp95 ms\tmax ms\t")
	for _, row := range append(slices.Clone(rep.Kinds), rep.Total) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t\n", row.Kind, row.Sent, row.OK, row.Retried,
			row.Errors, row.Mismatches, row.Transport, row.Lost, row.P50, row.P95, row.Max)
	}
	tw.Flush()
	if len(rep.CPUKills) > 0 {
		var parts []string
		for _, k := range rep.CPUKills {
			parts = append(parts, fmt.Sprintf("%s %d runs, p50 %.1f ms, max %.1f ms", k.Language, k.Runs, k.P50, k.Max))
		}
		fmt.Fprintf(w, "\nCPU time of the burners their CPU limit ended: %s\n", strings.Join(parts, "; "))
	}
	if res := rep.Resources; res != nil {
		fmt.Fprintln(w, "\nserver process (baseline: after the warm-up, nothing in flight; end: drained, after GC):")
		fmt.Fprintf(w, "  RSS          %d KiB -> %d KiB (%+.1f%%); less free heap kept by the Go runtime: %d KiB -> %d KiB (%+.1f%%)\n",
			res.RSSBaselineKiB, res.RSSEndKiB, res.RSSGrowthPct, res.NetBaselineKiB, res.NetEndKiB, res.NetGrowthPct)
		fmt.Fprintf(w, "    baseline   %s\n    end        %s\n", res.MemBaseline, res.MemEnd)
		fmt.Fprintf(w, "  open fds     %d -> %d\n", res.FDsBaseline, res.FDsEnd)
		fmt.Fprintf(w, "  goroutines   %d -> %d (load generator's workers not counted)\n", res.GoroutinesBase, res.GoroutinesEnd)
		fmt.Fprintf(w, "  run cgroups  %d of this server left (%d of other engines on this host)\n", len(res.RunCgroups), res.OtherCgroups)
		fmt.Fprintf(w, "  sandbox uids %d processes of this server left (%d of other servers on this host)\n", len(res.SandboxProcs), res.OtherSandboxProc)
		fmt.Fprintf(w, "  mounts       %d new\n", len(res.NewMounts))
		fmt.Fprintf(w, "  /tmp         %d new entries left\n", len(res.TmpLeft))
	}
	fmt.Fprintln(w, "\nchecks:")
	for _, c := range rep.Checks {
		state := "ok  "
		if !c.OK {
			state = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", state, c.Check, c.Detail)
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintln(w, "\nfirst failures:")
		for _, f := range rep.Failures {
			fmt.Fprintln(w, "  "+f)
		}
	}
	if len(rep.ServerLog) > 0 {
		fmt.Fprintln(w, "\nserver warnings and errors (first ones):")
		for _, l := range rep.ServerLog {
			fmt.Fprintln(w, "  "+l)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if rep.Passed {
		fmt.Fprintln(w, "\nsoak: PASS")
	} else {
		fmt.Fprintln(w, "\nsoak: FAIL")
	}
}

// ---- The run.

func runSoak(o *soakOptions) int {
	rep := &soakReport{Host: benchHost(nil), DurationS: o.duration.Seconds(), WarmupS: o.warmup.Seconds()}
	var local *soakLocal
	base := o.url
	if base == "" {
		var code int
		if local, code = soakStart(rep); local == nil {
			return code
		}
		defer local.close()
		base = local.base
	} else {
		rep.Server = "running server at " + base
		rep.Notes = append(rep.Notes, "with -url only results and /readyz are checked: the server's process, cgroups, mounts and files are not visible from here")
	}
	rep.URL = base

	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1100,
		MaxIdleConnsPerHost: 1100,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	r := &soakRunner{base: base, key: o.key, hc: &http.Client{Transport: transport}, kinds: soakKinds(), cpuKilled: map[string][]float64{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))}
	if local != nil {
		r.key = ""
	}
	r.cond = sync.NewCond(&r.gate)

	ready, err := r.ready()
	if err != nil {
		return fatalf(exitSetup, "soak: the server at %s is not ready: %v", base, err)
	}
	rep.Workers = ready.Workers
	if rep.Workers <= 0 {
		rep.Workers = runtime.NumCPU()
		rep.Notes = append(rep.Notes, fmt.Sprintf("GET /readyz did not give the server's workers: assumed %d", rep.Workers))
	}
	rep.Concurrency = o.concurrency
	if rep.Concurrency == 0 {
		rep.Concurrency = 2 * rep.Workers
	}
	if o.format == "text" {
		fmt.Fprintf(os.Stderr, "soak: %s; %s of load at %d in flight, warm-up %s...\n", rep.Server, o.duration, rep.Concurrency, o.warmup)
	}

	start := time.Now()
	end := start.Add(o.duration)
	r.workers = rep.Concurrency
	var wg sync.WaitGroup
	for i := range rep.Concurrency {
		wg.Go(func() { r.worker(uint64(i)) })
	}
	stopAt := time.AfterFunc(o.duration, func() { r.drain(true, 0) })
	defer stopAt.Stop()

	// Warm-up: at least o.warmup, and until every kind succeeded once
	// (but not past half the run).
	var base0 soakSnapshot
	warmed := false
	for time.Now().Before(start.Add(o.duration / 2)) {
		if time.Since(start) >= o.warmup && r.allKindsOK() {
			warmed = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep.WarmupS = time.Since(start).Seconds()
	if !warmed {
		rep.Notes = append(rep.Notes, fmt.Sprintf("not every kind of request had succeeded after %.0fs: the baseline was taken anyway", rep.WarmupS))
	}
	if local != nil && time.Now().Before(end) {
		// The baseline: nothing in flight, idle connections closed.
		if left := r.drain(false, 2*time.Minute); left > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d requests still in flight after 2 minutes at the baseline", left))
		}
		transport.CloseIdleConnections()
		base0 = local.baseline(r)
		r.resume()
	}

	// The end: the workers stop at the deadline; wait for what is in flight.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(time.Until(end) + 5*time.Minute):
		rep.Notes = append(rep.Notes, "requests were still in flight 5 minutes after the end: they count as lost")
	}
	elapsed := time.Since(start)
	transport.CloseIdleConnections()

	rep.Kinds, rep.Total = r.rows()
	rep.CPUKills = r.cpuKills()
	r.mu.Lock()
	rep.Failures = slices.Clone(r.failures)
	if r.nfail > len(r.failures) {
		rep.Failures = append(rep.Failures, fmt.Sprintf("... and %d more", r.nfail-len(r.failures)))
	}
	r.mu.Unlock()
	t := rep.Total
	rep.check("results", t.Mismatches == 0, "%d answered of %d sent, %d matched byte for byte and in status, %d mismatched", t.OK+t.Mismatches+t.Errors, t.Sent, t.OK, t.Mismatches)
	rep.check("errors", t.Errors == 0 && t.Transport == 0, "%d error answers, %d transport errors (%d 429/503 retried, not failures)", t.Errors, t.Transport, t.Retried)
	rep.check("lost", t.Lost == 0, "%d sent - %d answered - %d transport errors = %d lost", t.Sent, t.OK+t.Mismatches+t.Errors, t.Transport, t.Lost)
	var missing []string
	for _, row := range rep.Kinds {
		if row.OK == 0 {
			missing = append(missing, row.Kind)
		}
	}
	rep.check("every kind ran", len(missing) == 0, "%d of %d kinds of request succeeded at least once%s", len(rep.Kinds)-len(missing), len(rep.Kinds), soakList(" (none of: ", missing, ")"))
	if local != nil && base0.rss > 0 {
		local.finish(rep, r, base0)
	} else if local != nil {
		rep.Notes = append(rep.Notes, "the run ended before a baseline was taken: resources not compared")
	}
	idle, err := r.ready()
	rep.check("server idle", err == nil && idle.InFlight == 0 && idle.Queued == 0, "GET /readyz: in_flight %d, queued %d%s", idle.InFlight, idle.Queued, soakErr(err))
	if local != nil {
		rep.ServerLog = local.log.lines()
	}
	rep.DurationS = elapsed.Round(100 * time.Millisecond).Seconds()
	rep.Passed = true
	for _, c := range rep.Checks {
		rep.Passed = rep.Passed && c.OK
	}
	return benchEnd(o.format, rep, func(w io.Writer) { printSoak(w, rep) }, !rep.Passed)
}

func soakErr(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}

func soakList(prefix string, items []string, suffix string) string {
	if len(items) == 0 {
		return ""
	}
	if len(items) > 10 {
		items = append(slices.Clone(items[:10]), fmt.Sprintf("... %d more", len(items)-10))
	}
	return prefix + strings.Join(items, ", ") + suffix
}

func (r *soakRunner) allKindsOK() bool {
	for _, k := range r.kinds {
		k.mu.Lock()
		ok := k.ok
		k.mu.Unlock()
		if ok == 0 {
			return false
		}
	}
	return true
}

type soakReady struct {
	Status   string `json:"status"`
	Workers  int    `json:"workers"`
	InFlight int    `json:"in_flight"`
	Queued   int64  `json:"queued"`
}

func (r *soakRunner) ready() (soakReady, error) {
	var rd soakReady
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/readyz", nil)
	if err != nil {
		return rd, err
	}
	resp, err := r.do(req)
	if err != nil {
		return rd, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return rd, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return rd, json.Unmarshal(b, &rd)
}

// ---- The in-process server and what it holds.

// soakLocal is the server in this process and what it is measured by.
type soakLocal struct {
	base    string
	engine  *sandbox.Engine
	x       *executor.Executor // the server's executor, whose pool is drained at the end
	dir     string             // private: tmp/ (TMPDIR) and data/ (the data dir)
	tmpDir  string
	dataDir string
	log     *soakLog
	tmpSeen map[string]string // the host /tmp entries it could have made, before the run (leakcheck.HostTemp)
	mounts  map[string]int
	data0   map[string]bool // the data dir at the baseline
	stop    func()
}

// soakStart starts the server in this process as "sandbox-run serve"
// would, with a private data dir and TMPDIR.
func soakStart(rep *soakReport) (*soakLocal, int) {
	if runtime.GOOS != "linux" {
		return nil, fatalf(exitSetup, "soak: the in-process server needs Linux; give -url of a running server")
	}
	cfg, err := api.LoadConfig("", os.Getenv)
	if err != nil {
		return nil, fatalf(exitUsage, "config: %v", err)
	}
	engine, err := sandbox.Default()
	if err != nil {
		return nil, fatalf(exitSetup, "soak: cannot sandbox on this host: %v", err)
	}
	rep.Host = benchHost(engine)
	l := &soakLocal{engine: engine, log: &soakLog{}}
	l.mounts = soakMounts("")
	cache := filepath.Join(cfg.DataDir, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fatalf(exitSetup, "soak: toolchain cache: %v", err)
	}
	if l.dir, err = os.MkdirTemp("", "sandbox-run-soak-"); err != nil {
		return nil, fatalf(exitSetup, "soak: %v", err)
	}
	l.tmpDir, l.dataDir = filepath.Join(l.dir, "tmp"), filepath.Join(l.dir, "data")
	for _, d := range []string{l.tmpDir, l.dataDir} {
		if err == nil {
			err = os.Mkdir(d, 0o755)
		}
	}
	if err == nil {
		err = os.Symlink(cache, filepath.Join(l.dataDir, "cache"))
	}
	if err != nil {
		os.RemoveAll(l.dir)
		return nil, fatalf(exitSetup, "soak: %v", err)
	}
	// Whatever the server writes to TMPDIR lands in a directory of its own.
	os.Setenv("TMPDIR", l.tmpDir)

	cfg.Addr, cfg.Keys, cfg.DataDir = "127.0.0.1:0", nil, l.dataDir
	fail := func(code int, format string, a ...any) (*soakLocal, int) {
		l.close()
		return nil, fatalf(code, format, a...)
	}
	if err := cfg.Validate(); err != nil {
		return fail(exitUsage, "config: %v", err)
	}
	x, err := local.NewExecutor(cfg)
	if err != nil {
		return fail(exitSetup, "soak: cannot sandbox on this host: %v", err)
	}
	l.x = x
	// The sandboxes a server prepares at start are ready before the
	// baseline, not built (and counted) during the load.
	if cfg.Prewarm > 0 {
		x.Prewarm(cfg.Prewarm)
		cfg.Prewarm = 0
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fail(exitSetup, "soak: %v", err)
	}
	// What of the host's /tmp the server could have made: every file it
	// means to make goes to its private TMPDIR, checked in full at the end.
	l.tmpSeen = leakcheck.HostTemp(soakUIDBase, soakUIDBase+soakUIDs)
	srv := api.New(cfg, local.New(x), slog.New(slog.NewJSONHandler(l.log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	l.stop = func() { cancel(); <-done }
	l.base = "http://" + ln.Addr().String()
	rep.Server = fmt.Sprintf("in-process on %s: workers %d, queue %d, no API keys, private data dir and TMPDIR under %s", ln.Addr(), cfg.Workers, cfg.Queue, l.dir)
	return l, 0
}

func (l *soakLocal) close() {
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
	os.RemoveAll(l.dir)
}

// soakSnapshot is what the server process holds at one moment.
type soakSnapshot struct {
	rss        int64
	mem        soakMemory
	fds        []string // the targets of the open descriptors
	goroutines int
}

func (l *soakLocal) snapshot(r *soakRunner) soakSnapshot {
	mem := soakMem()
	s := soakSnapshot{rss: mem.RSS, mem: mem, fds: soakFDs(), goroutines: runtime.NumGoroutine()}
	r.gate.Lock()
	s.goroutines -= r.workers // the load generator's, parked at the gate or gone
	r.gate.Unlock()
	return s
}

// baseline records the server's resources with nothing in flight: the
// least of a few samples, once connections have had time to close.
func (l *soakLocal) baseline(r *soakRunner) soakSnapshot {
	time.Sleep(300 * time.Millisecond)
	best := l.snapshot(r)
	for range 5 {
		time.Sleep(100 * time.Millisecond)
		s := l.snapshot(r)
		if len(s.fds) < len(best.fds) {
			best.fds = s.fds
		}
		best.goroutines = min(best.goroutines, s.goroutines)
	}
	best.mem = soakSettledMem()
	best.rss = best.mem.RSS
	l.data0 = soakTree(l.dataDir)
	return best
}

// finish compares the server's resources at the end with the baseline and
// looks for anything of its runs left on the host.
func (l *soakLocal) finish(rep *soakReport, r *soakRunner, b soakSnapshot) {
	res := &soakResources{RSSBaselineKiB: b.rss, NetBaselineKiB: b.mem.net(), MemBaseline: b.mem, FDsBaseline: len(b.fds), GoroutinesBase: b.goroutines}
	rep.Resources = res
	// Sandboxes waiting idle in the pool are the server's, not leftovers.
	if l.x != nil {
		l.x.Engine().Drain()
	}
	// Give the server up to 15 s to close connections and end goroutines.
	var s soakSnapshot
	for deadline := time.Now().Add(15 * time.Second); ; {
		s = l.snapshot(r)
		res.RunCgroups, res.OtherCgroups = soakRunCgroups(l.engine)
		res.SandboxProcs, res.OtherSandboxProc = soakSandboxProcs()
		if len(s.fds) <= len(b.fds) && s.goroutines <= b.goroutines+5 && len(res.RunCgroups) == 0 && len(res.SandboxProcs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	res.MemEnd = soakSettledMem()
	res.RSSEndKiB = res.MemEnd.RSS
	res.RSSGrowthPct = 100 * float64(res.RSSEndKiB-b.rss) / float64(b.rss)
	res.NetEndKiB = res.MemEnd.net()
	res.NetGrowthPct = 100 * float64(res.NetEndKiB-res.NetBaselineKiB) / float64(res.NetBaselineKiB)
	res.FDsEnd, res.GoroutinesEnd = len(s.fds), s.goroutines
	res.NewFDs = soakExtra(b.fds, s.fds)
	for m, n := range soakMounts(l.dir) {
		for range n - l.mounts[m] {
			res.NewMounts = append(res.NewMounts, m)
		}
	}
	slices.Sort(res.NewMounts)

	// The host's /tmp: what the server could have made there (a sandbox
	// uid's entry, a toolchain's leftover) that appeared during the run.
	res.TmpLeft = leakcheck.NewIn(l.tmpSeen, leakcheck.HostTemp(soakUIDBase, soakUIDBase+soakUIDs))
	// The private TMPDIR must be empty, the data dir as at the baseline.
	for p := range soakTree(l.tmpDir) {
		res.PrivateLeft = append(res.PrivateLeft, "TMPDIR/"+p)
	}
	for p := range soakTree(l.dataDir) {
		if !l.data0[p] {
			res.PrivateLeft = append(res.PrivateLeft, "data/"+p)
		}
	}
	slices.Sort(res.PrivateLeft)

	// +10%, or 3 MiB on a small baseline: the Go heap's own noise between
	// two quiet moments (what the warm pool and buffer pools hold shows as a
	// fixed step, whatever the length of the soak; a leak grows with it).
	// How much free heap the runtime keeps varies from one moment to the
	// next: a leak shows in the raw RSS and in the net figure alike.
	growthOK := min(res.NetGrowthPct, res.RSSGrowthPct) <= 10 || res.NetEndKiB-res.NetBaselineKiB <= soakMemSlackKiB
	rep.check("memory", growthOK, "RSS less the free heap the Go runtime kept %d KiB at the baseline, %d KiB at the end (%+.1f%%, at most +10%% or +%d KiB); raw RSS %d -> %d KiB (%+.1f%%)",
		res.NetBaselineKiB, res.NetEndKiB, res.NetGrowthPct, soakMemSlackKiB, b.rss, res.RSSEndKiB, res.RSSGrowthPct)
	rep.check("descriptors", len(res.NewFDs) == 0 && res.FDsEnd <= res.FDsBaseline, "%d open at the baseline, %d at the end%s", res.FDsBaseline, res.FDsEnd, soakList(" (new: ", res.NewFDs, ")"))
	rep.check("goroutines", res.GoroutinesEnd <= res.GoroutinesBase+5, "%d at the baseline, %d at the end (at most 5 more)", res.GoroutinesBase, res.GoroutinesEnd)
	rep.check("cgroups", len(res.RunCgroups) == 0, "%d run cgroups of this process left%s", len(res.RunCgroups), soakList(": ", res.RunCgroups, ""))
	rep.check("processes", len(res.SandboxProcs) == 0, "%d processes with sandbox uids descended from this process left%s", len(res.SandboxProcs), soakList(": ", res.SandboxProcs, ""))
	rep.check("mounts", len(res.NewMounts) == 0, "%d new mounts%s", len(res.NewMounts), soakList(": ", res.NewMounts, ""))
	rep.check("temp files", len(res.TmpLeft) == 0 && len(res.PrivateLeft) == 0, "%d new /tmp entries left, %d entries left in its TMPDIR and data dir%s%s",
		len(res.TmpLeft), len(res.PrivateLeft), soakList(" (/tmp: ", res.TmpLeft, ")"), soakList(" (", res.PrivateLeft, ")"))
}

// soakLog keeps the first warnings and errors the server logs.
type soakLog struct {
	mu    sync.Mutex
	first []string
	n     int
}

func (s *soakLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if len(s.first) < 10 {
		s.first = append(s.first, string(bytes.TrimSpace(p)))
	}
	return len(p), nil
}

func (s *soakLog) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.first)
	if s.n > len(s.first) {
		out = append(out, fmt.Sprintf("... %d more", s.n-len(s.first)))
	}
	return out
}

// soakMemory is this process's memory in KiB: its resident set (VmRSS)
// in parts, and the Go runtime's view.
type soakMemory struct {
	RSS        int64 `json:"rss_kib"`
	Anon       int64 `json:"rss_anon_kib"`
	File       int64 `json:"rss_file_kib"`
	Shmem      int64 `json:"rss_shmem_kib"`
	HeapInuse  int64 `json:"go_heap_inuse_kib"`
	Unreleased int64 `json:"go_heap_idle_unreleased_kib"`
	Stacks     int64 `json:"go_stacks_kib"`
	GoSys      int64 `json:"go_sys_kib"`
}

func soakMem() soakMemory {
	b, _ := os.ReadFile("/proc/self/status")
	rss := benchParseStatus(string(b))
	m := soakMemory{RSS: rss.RSS, Anon: rss.Anon, File: rss.File, Shmem: rss.Shmem}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.HeapInuse, m.Stacks, m.GoSys = int64(ms.HeapInuse>>10), int64(ms.StackInuse>>10), int64(ms.Sys>>10)
	m.Unreleased = int64((ms.HeapIdle - ms.HeapReleased) >> 10)
	return m
}

func (m soakMemory) String() string {
	return fmt.Sprintf("%d KiB (anon %d, file %d, shmem %d; Go heap in use %d, idle not released %d, stacks %d, runtime total %d)",
		m.RSS, m.Anon, m.File, m.Shmem, m.HeapInuse, m.Unreleased, m.Stacks, m.GoSys)
}

// net is the RSS less the free heap pages the Go runtime kept. Even
// debug.FreeOSMemory leaves some (Go 1.26 keeps megabytes after a busy
// spell: GODEBUG=scavtrace=1 shows forced scavenges releasing nothing
// more), and that memory is free, not held by the server.
func (m soakMemory) net() int64 { return m.RSS - m.Unreleased }

// soakMemSlackKiB is the growth of the memory check's figure that passes
// whatever the baseline.
const soakMemSlackKiB = 3072

// soakSettledMem is the memory after garbage collection: of a few rounds
// of GC and returning free memory to the OS, the one with the least net
// RSS, so that what the runtime happens to hold for a moment does not
// count.
func soakSettledMem() soakMemory {
	var best soakMemory
	for i := range 5 {
		runtime.GC()
		debug.FreeOSMemory()
		time.Sleep(100 * time.Millisecond)
		if m := soakMem(); i == 0 || m.net() < best.net() {
			best = m
		}
	}
	return best
}

// soakFDs are the targets of this process's open descriptors.
func soakFDs() []string {
	entries, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range entries {
		t, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		// Sockets and pipes differ by inode only: count them by kind.
		if i := strings.Index(t, ":["); i > 0 {
			t = t[:i]
		}
		out = append(out, t)
	}
	return out
}

// soakExtra is what end has more of than base (as multisets).
func soakExtra(base, end []string) []string {
	n := map[string]int{}
	for _, s := range base {
		n[s]++
	}
	var out []string
	for _, s := range end {
		if n[s] > 0 {
			n[s]--
		} else {
			out = append(out, s)
		}
	}
	return out
}

// soakMounts counts this mount namespace's mounts by root, mount point,
// type and source.
func soakMounts(own string) map[string]int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	m := map[string]int{}
	under := func(p, dir string) bool { return dir != "" && (p == dir || strings.HasPrefix(p, dir+"/")) }
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		// Other programs (test binaries beside the short soak) mount
		// tmpfs in their temporary directories: only ours count there.
		if under(f[4], leakcheck.HostTempDir) && !under(f[4], own) {
			continue
		}
		m[fmt.Sprintf("%s on %s type %s (root %s)", f[sep+2], f[4], f[sep+1], f[3])]++
	}
	return m
}

// soakRunCgroups lists the sandbox cgroups of this process (ct-<pid>-N,
// and run-<pid>-N of older engines) under the engine's parents, and counts
// those of other engines.
func soakRunCgroups(e *sandbox.Engine) (ours []string, others int) {
	mine := func(name string) bool {
		return strings.HasPrefix(name, fmt.Sprintf("run-%d-", os.Getpid())) || strings.HasPrefix(name, fmt.Sprintf("ct-%d-", os.Getpid()))
	}
	for ctrl, dir := range e.Cgroups().Parents {
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			switch {
			case !en.IsDir() || !strings.HasPrefix(en.Name(), "run-") && !strings.HasPrefix(en.Name(), "ct-"):
			case mine(en.Name()):
				ours = append(ours, ctrl+":"+en.Name())
			default:
				others++
			}
		}
	}
	slices.Sort(ours)
	return ours, others
}

// The default engine's sandbox uids: 4096 slots of two uids from 2000000000.
const (
	soakUIDBase = 2000000000
	soakUIDs    = 2 * 4096
)

// soakSandboxProcs lists the processes running as a sandbox uid that
// descend from this process, and counts the others.
func soakSandboxProcs() (ours []string, others int) {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	type proc struct {
		pid  int
		desc string
	}
	var sandboxed []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var name string
		uid, ppid := -1, 0
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			f := strings.Fields(v)
			switch {
			case len(f) == 0:
			case k == "Name":
				name = f[0]
			case k == "PPid":
				ppid, _ = strconv.Atoi(f[0])
			case k == "Uid":
				uid, _ = strconv.Atoi(f[0])
			}
		}
		parent[pid] = ppid
		if uid >= soakUIDBase && uid < soakUIDBase+soakUIDs {
			sandboxed = append(sandboxed, proc{pid, fmt.Sprintf("pid %d uid %d %s", pid, uid, name)})
		}
	}
	self := os.Getpid()
	for _, p := range sandboxed {
		mine := false
		for q, hops := p.pid, 0; q > 1 && hops < 1000; q, hops = parent[q], hops+1 {
			if q == self {
				mine = true
				break
			}
		}
		if mine {
			ours = append(ours, p.desc)
		} else {
			others++
		}
	}
	return ours, others
}

// soakTree lists every path under dir (not following symlinks).
func soakTree(dir string) map[string]bool {
	m := map[string]bool{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if rel, e := filepath.Rel(dir, p); e == nil && rel != "." {
			m[rel] = true
		}
		return nil
	})
	return m
}

func soakExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
