package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// cliTimeout bounds one sandbox-run command (software emulation is slow;
// the limits under test are a few seconds).
const cliTimeout = 5 * time.Minute

type driver struct {
	cfg         config
	s           *suite
	exe         string   // this program, re-executed to enter a unit
	unitParents []string // where units are made, one per hierarchy
	base        snapshot // the VM before any sandbox-run command
	cliUnits    []*unit
}

// command is sandbox-run with args, to be started in the unit u.
func (d *driver) command(u *unit, args ...string) *exec.Cmd {
	cmd := exec.Command(d.exe, append([]string{enterArg, d.cfg.bin}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root", "TMPDIR=/tmp", "LANG=C.UTF-8",
		enterEnv + "=" + u.procsFiles()}
	cmd.Dir = d.cfg.workDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// square reads "TAG N" and prints "TAG N*N": the programs every language
// runs, through the CLI and concurrently through the server.
var square = map[string]string{
	"python": "tag, n = input().split()\nprint(tag, int(n) ** 2)\n",
	"bash":   "read -r tag n\necho \"$tag $((n * n))\"\n",
	"c": `#include <stdio.h>
int main(void) {
	char tag[64];
	long n;
	if (scanf("%63s %ld", tag, &n) != 2) return 2;
	printf("%s %ld\n", tag, n * n);
	return 0;
}
`,
	"javascript": "const [tag, n] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/);\nconsole.log(tag, Number(n) ** 2);\n",
}

// squareOut is what square prints for "tag n".
func squareOut(tag string, n int) string { return fmt.Sprintf("%s %d\n", tag, n*n) }

// cliResult is what one sandbox-run command did.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, clip(r.stdout), clip(r.stderr))
}

// cli runs sandbox-run with args, stdin as its standard input.
func (d *driver) cli(stdin string, args ...string) (cliResult, error) {
	what := strings.Join(strings.Fields("sandbox-run "+strings.Join(args, " ")), " ")
	if len(what) > 100 {
		what = what[:100] + "..."
	}
	u, err := d.newUnit(fmt.Sprintf("cli-%02d.service", len(d.cliUnits)+1), what)
	if err != nil {
		return cliResult{}, err
	}
	d.cliUnits = append(d.cliUnits, u)
	cmd := d.command(u, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return cliResult{}, err
	}
	timer := time.AfterFunc(cliTimeout, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = cmd.Wait()
	timedOut := !timer.Stop()
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case timedOut:
		return r, fmt.Errorf("sandbox-run %s: no answer within %s (%v); stderr: %s", strings.Join(args, " "), cliTimeout, err, clip(r.stderr))
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return r, fmt.Errorf("sandbox-run itself died of %v; stderr: %s", ws.Signal(), clip(r.stderr))
		}
		r.code = exit.ExitCode()
	case err != nil:
		return r, fmt.Errorf("sandbox-run: %v", err)
	}
	return r, nil
}

// result is the JSON result of an execution (CLI or API).
type result struct {
	ExecutionID     string                     `json:"execution_id"`
	Status          string                     `json:"status"`
	Stdout          string                     `json:"stdout"`
	Stderr          string                     `json:"stderr"`
	StdoutEncoding  string                     `json:"stdout_encoding"`
	ExitCode        int                        `json:"exit_code"`
	Signal          string                     `json:"signal"`
	LimitReason     string                     `json:"limit_reason"`
	Language        string                     `json:"language"`
	Version         string                     `json:"version"`
	StdoutTruncated bool                       `json:"stdout_truncated"`
	OutputFiles     map[string]json.RawMessage `json:"output_files"`
	DurationMs      float64                    `json:"duration_ms"`
	CPUTimeMs       float64                    `json:"cpu_time_ms"`
	MemoryUsedMB    float64                    `json:"memory_used_mb"`
	Error           string                     `json:"error"`
	Compile         *struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
		Stderr   string `json:"stderr"`
		CacheHit bool   `json:"cache_hit"`
	} `json:"compile"`
}

func (r *result) summary() string {
	s := fmt.Sprintf("status=%s exit=%d", r.Status, r.ExitCode)
	if r.Signal != "" {
		s += " signal=" + r.Signal
	}
	if r.LimitReason != "" {
		s += " limit=" + r.LimitReason
	}
	if r.Compile != nil {
		s += fmt.Sprintf(" compile=%s cache_hit=%v", r.Compile.Status, r.Compile.CacheHit)
	}
	s += fmt.Sprintf(" wall=%.0fms cpu=%.0fms mem=%.1fMiB", r.DurationMs, r.CPUTimeMs, r.MemoryUsedMB)
	if r.Error != "" {
		s += " error=" + r.Error
	}
	return s
}

// cliJSON runs sandbox-run execute --output-format json and decodes it.
func (d *driver) cliJSON(stdin string, args ...string) (*result, cliResult, error) {
	args = append([]string{"execute", "--output-format", "json"}, args...)
	out, err := d.cli(stdin, args...)
	if err != nil {
		return nil, out, err
	}
	var r result
	if err := json.Unmarshal([]byte(out.stdout), &r); err != nil {
		return nil, out, fmt.Errorf("not a JSON result (%v): %s", err, out)
	}
	info("%s", r.summary())
	return &r, out, nil
}

// textCase is one sandbox-run execute in text mode with exact expectations.
type textCase struct {
	name, lang string
	args       []string // after execute; -l LANG is added
	stdin      string
	stdout     string
	stderr     *string // nil: not checked
	stderrHas  []string
	code       int
}

func (d *driver) runText(c textCase) {
	name := fmt.Sprintf("cli: %s: %s", c.lang, c.name)
	if !d.has(c.lang) {
		d.s.skip(name, c.lang+" is not among the languages to check")
		return
	}
	d.s.run(name, func() error {
		args := append([]string{"execute", "-l", c.lang}, c.args...)
		r, err := d.cli(c.stdin, args...)
		if err != nil {
			return err
		}
		var p problems
		p.eq("exit status", r.code, c.code)
		p.eq("stdout", r.stdout, c.stdout)
		if c.stderr != nil {
			p.eq("stderr", r.stderr, *c.stderr)
		}
		for _, s := range c.stderrHas {
			p.contains("stderr", r.stderr, s)
		}
		if len(p) > 0 {
			p.addf("(the whole answer: %s)", r)
		}
		return p.err()
	})
}

func ptr[T any](v T) *T { return &v }

func (d *driver) cliChecks() {
	s := d.s
	s.run("cli: doctor (cgroup version of the layout, trial run)", d.checkDoctor)

	// Exact streams and exit statuses, stdin and arguments.
	d.runText(textCase{name: "stdout, stderr and exit status", lang: "bash",
		args:   []string{"-c", "printf 'out\\n'; printf 'err\\n' >&2; exit 3"},
		stdout: "out\n", stderr: ptr("err\n"), code: 3})
	d.runText(textCase{name: "stdin and arguments", lang: "bash", stdin: "Ada Lovelace\n",
		args:   []string{"-i", "-", "-c", `read -r x; echo "hello $x"; echo "$#:$1:$2"`, "--", "one", "two words"},
		stdout: "hello Ada Lovelace\n2:one:two words\n", stderr: ptr(""), code: 0})
	d.runText(textCase{name: "killed by a signal (exit 128+N)", lang: "bash",
		args: []string{"-c", "echo before; kill -SEGV $$; echo after"}, stdout: "before\n", code: 128 + 11})
	for _, lang := range []string{"python", "bash", "c", "javascript"} {
		d.runText(textCase{name: "program reading stdin", lang: lang,
			args: []string{"-i", "cli-" + lang + " 12", "-c", square[lang]}, stdout: squareOut("cli-"+lang, 12), stderr: ptr(""), code: 0})
	}
	d.runText(textCase{name: "arguments", lang: "python",
		args:   []string{"-c", "import sys; print(sys.argv[1:])", "--", "a", "b c"},
		stdout: "['a', 'b c']\n", code: 0})
	d.runText(textCase{name: "arguments", lang: "javascript",
		args:   []string{"-c", "console.log(JSON.stringify(process.argv.slice(2)))", "--", "a", "b c"},
		stdout: "[\"a\",\"b c\"]\n", code: 0})
	d.runText(textCase{name: "uncaught exception", lang: "python",
		args:   []string{"-c", "print('before')\nraise ValueError('bad thing')\n"},
		stdout: "before\n", stderrHas: []string{"ValueError: bad thing"}, code: 1})
	d.runText(textCase{name: "compile error (exit 122)", lang: "c",
		args:   []string{"-c", "int main(void) { return x; }\n"},
		stdout: "", stderrHas: []string{"error", "'x' undeclared", "compile error"}, code: 122})

	d.checkFilesJSON()
	d.checkCompileJSON()
	d.checkLimits()
}

// checkDoctor: sandbox-run doctor says the host can run sandboxes, with
// the cgroup version of the layout, and its trial run worked.
func (d *driver) checkDoctor() error {
	out, err := d.cli("", "doctor", "--output-format", "json")
	if err != nil {
		return err
	}
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name   string `json:"name"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		return fmt.Errorf("doctor: not JSON (%v): %s", err, out)
	}
	var p problems
	p.eq("doctor ok", rep.OK, true)
	p.eq("doctor exit status", out.code, 0)
	seen := map[string]bool{}
	for _, c := range rep.Checks {
		seen[c.Name] = true
		info("doctor %s: ok=%v %s", c.Name, c.OK, c.Detail)
		switch c.Name {
		case "cgroups":
			want := "cgroup " + d.engineVersion() + ","
			p.contains("doctor's cgroups check", c.Detail, want)
		case "trial run":
			p.eq("trial run ok", c.OK, true)
		case "toolchains":
			for _, l := range d.cfg.languages {
				p.contains("doctor's toolchains", c.Detail, l+" ")
			}
		}
	}
	for _, n := range []string{"cgroups", "trial run", "toolchains"} {
		if !seen[n] {
			p.addf("doctor has no %q check", n)
		}
	}
	return p.err()
}

// checkFilesJSON: a code file (language from its extension), an input file,
// stdin, and an output file, through --output-format json.
func (d *driver) checkFilesJSON() {
	const name = "cli: python: code file, input file, output file (json)"
	if !d.has("python") {
		d.s.skip(name, "python is not among the languages to check")
		return
	}
	d.s.run(name, func() error {
		code := filepath.Join(d.cfg.workDir, "greet.py")
		data := filepath.Join(d.cfg.workDir, "data.txt")
		if err := os.WriteFile(code, []byte(`import sys
name = sys.stdin.read().strip()
data = open("data.txt").read()
open("greeting.txt", "w").write("hello " + name + ", " + data)
print("wrote greeting.txt", len(data))
`), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(data, []byte("some data"), 0o644); err != nil {
			return err
		}
		r, out, err := d.cliJSON("Ada", "--code", code, "--input", "-", "--file", "data.txt="+data)
		if err != nil {
			return err
		}
		var p problems
		p.eq("exit status of sandbox-run", out.code, 0)
		p.eq("status", r.Status, "completed")
		p.eq("exit_code", r.ExitCode, 0)
		p.eq("language", r.Language, "python")
		p.eq("stdout", r.Stdout, "wrote greeting.txt 9\n")
		p.eq("stderr", r.Stderr, "")
		p.eq("output files", len(r.OutputFiles), 1)
		var content string
		if raw, ok := r.OutputFiles["greeting.txt"]; !ok || json.Unmarshal(raw, &content) != nil {
			p.addf("output_files[greeting.txt]: missing or not text: %s", raw)
		} else {
			p.eq("greeting.txt", content, "hello Ada, some data")
		}
		if !strings.HasPrefix(r.ExecutionID, "exec_") {
			p.addf("execution_id %q", r.ExecutionID)
		}
		return p.err()
	})
}

// checkCompileJSON: the C compile step and its run, through JSON.
func (d *driver) checkCompileJSON() {
	const name = "cli: c: compile step and run (json)"
	if !d.has("c") {
		d.s.skip(name, "c is not among the languages to check")
		return
	}
	d.s.run(name, func() error {
		r, out, err := d.cliJSON("", "-l", "c", "-c", `#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
	long f = 1;
	for (int i = 2; i <= 10; i++) f *= i;
	printf("%.6f %ld %zu %s\n", sqrt(2.0), f, strlen(argv[1]), argv[1]);
	return 0;
}
`, "--", "arg one")
		if err != nil {
			return err
		}
		var p problems
		p.eq("exit status of sandbox-run", out.code, 0)
		p.eq("status", r.Status, "completed")
		p.eq("stdout", r.Stdout, "1.414214 3628800 7 arg one\n")
		p.eq("language", r.Language, "c")
		if r.Compile == nil {
			p.addf("no compile step in the result")
		} else {
			p.eq("compile.status", r.Compile.Status, "completed")
			p.eq("compile.exit_code", r.Compile.ExitCode, 0)
		}
		return p.err()
	})
}

// limitCase is one limit through the CLI's JSON result.
type limitCase struct {
	name, lang, code string
	args             []string
	status, limit    string
	stdout           *string
	truncated        bool
	exit             int  // sandbox-run's exit status (json and text mode alike)
	text             bool // also run in text mode
}

func (d *driver) checkLimits() {
	for _, c := range []limitCase{
		{name: "wall time", lang: "bash", code: "echo start; sleep 60; echo end",
			args: []string{"--timeout", "2"}, status: "timeout", limit: "wall_time", stdout: ptr("start\n"), exit: 124, text: true},
		{name: "CPU time", lang: "bash", code: "while :; do :; done",
			args: []string{"--timeout", "60", "--cpu-time", "1"}, status: "timeout", limit: "cpu_time", exit: 124},
		{name: "memory", lang: "python", code: "x = b'x' * (200 << 20)\nprint('allocated', len(x))\n",
			args: []string{"--memory", "64"}, status: "error_runtime", limit: "memory", stdout: ptr(""), exit: 121, text: true},
		{name: "processes", lang: "python", code: `import os, sys, time
for i in range(20):
    try:
        pid = os.fork()
    except OSError as e:
        print("fork failed after", i, file=sys.stderr)
        sys.exit(1)
    if pid == 0:
        time.sleep(30)
        os._exit(0)
print("forked 20")
`, args: []string{"--max-processes", "8"}, status: "error_runtime", limit: "processes", stdout: ptr(""), exit: 121},
		{name: "output", lang: "bash", code: "while :; do echo yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy; done",
			args: []string{"--max-output", "4096", "--timeout", "60"}, status: "error_runtime", limit: "output", truncated: true, exit: 121},
	} {
		name := fmt.Sprintf("cli: limit: %s (%s)", c.name, c.lang)
		if !d.has(c.lang) {
			d.s.skip(name, c.lang+" is not among the languages to check")
			continue
		}
		d.s.run(name, func() error {
			args := append([]string{"-l", c.lang, "-c", c.code}, c.args...)
			r, out, err := d.cliJSON("", args...)
			if err != nil {
				return err
			}
			var p problems
			p.eq("status", r.Status, c.status)
			p.eq("limit_reason", r.LimitReason, c.limit)
			if c.stdout != nil {
				p.eq("stdout", r.Stdout, *c.stdout)
			}
			p.eq("stdout_truncated", r.StdoutTruncated, c.truncated)
			if c.truncated && (len(r.Stdout) == 0 || len(r.Stdout) > 4096) {
				p.addf("truncated stdout has %d bytes, want 1..4096", len(r.Stdout))
			}
			p.eq("exit status of sandbox-run", out.code, c.exit)
			if c.text {
				t, err := d.cli("", append([]string{"execute"}, args...)...)
				if err != nil {
					return err
				}
				p.eq("exit status in text mode", t.code, c.exit)
				if c.stdout != nil {
					p.eq("stdout in text mode", t.stdout, *c.stdout)
				}
			}
			return p.err()
		})
	}
}
