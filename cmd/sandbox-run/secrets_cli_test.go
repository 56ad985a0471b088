//go:build linux

package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestSecretsCLI runs `sandbox-run secrets` against a real serve (no API
// keys: the keyless owner) with a data dir and a network.allow naming a
// listener on this host, as a person would: put with the value on
// standard input (a file, a terminal with echo off), ls (text and json,
// never the value), execute --server --secret whose program sends the
// placeholder and whose upstream gets the value, a local execute --secret
// on the same data dir, rm, and the errors (the server's 400, no such
// secret, a server that cannot be reached, a value on the command line,
// an empty one).
func TestSecretsCLI(t *testing.T) {
	var mu sync.Mutex
	var got []string // what the upstream got: Authorization, X-Token, the path
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Token")+"|"+r.URL.Path)
		mu.Unlock()
		io.WriteString(w, "ok")
	})}
	go upstream.Serve(ln)
	t.Cleanup(func() { upstream.Close() })
	allow := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)
	upstreamGot := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}

	// The server's data dir, which the local run uses too.
	data := t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	if err := os.Symlink(cache, filepath.Join(data, "cache")); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, []string{"SANDBOX_RUN_NETWORK_ALLOW=" + allow}, "--data-dir", data)
	env := []string{"SANDBOX_RUN_SERVER=" + srv.url}
	run := func(stdin string, args ...string) cliResult {
		t.Helper()
		return cliEnv(t, env, stdin, append([]string{"secrets"}, args...)...)
	}
	b := make([]byte, 16)
	rand.Read(b)
	value := "sk-test-" + hex.EncodeToString(b)
	noValue := func(what string, r cliResult) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, value) {
			t.Errorf("%s prints the value: %+v", what, r)
		}
	}

	// put: the value on stdin, its newline dropped; nothing printed.
	r := run(value+"\n", "put", "TOKEN", "--host", "host.sandbox.internal", "--header", "Authorization", "--header-format", "Bearer {value}")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("put: %+v\nserver:\n%s", r, srv.stderr)
	}
	// --from-file, CRLF dropped; -o json prints the secret, not its value.
	file := filepath.Join(t.TempDir(), "other.txt")
	os.WriteFile(file, []byte("other-"+value+"\r\n"), 0o600)
	r = run("", "put", "OTHER", "--from-file", file, "--host", "example.com,*.example.org", "-o", "json")
	var put wire.Secret
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &put) != nil || put.Name != "OTHER" || strings.Join(put.Hosts, ",") != "example.com,*.example.org" || put.Header != nil {
		t.Fatalf("put --from-file -o json: %+v", r)
	}
	noValue("put -o json", r)

	t.Run("ls", func(t *testing.T) {
		r := run("", "ls")
		noValue("ls", r)
		if r.code != 0 || !regexp.MustCompile(`^NAME +HOSTS +HEADER +UPDATED\n`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^TOKEN +host\.sandbox\.internal +Authorization: Bearer \{value\} +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(r.stdout) ||
			!regexp.MustCompile(`(?m)^OTHER +example\.com,\*\.example\.org +- +\d{4}-`).MatchString(r.stdout) {
			t.Errorf("ls: %+v", r)
		}
		r = run("", "ls", "-o", "json")
		noValue("ls -o json", r)
		var all []wire.Secret
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &all) != nil || len(all) != 2 {
			t.Fatalf("ls -o json: %+v", r)
		}
		for _, s := range all {
			if s.Name == "TOKEN" && (s.Header == nil || s.Header.Name != "Authorization" || s.Header.Format != "Bearer {value}" || s.Updated.IsZero()) {
				t.Errorf("ls -o json: TOKEN is %+v", s)
			}
		}
	})

	// The program sends TOKEN's placeholder in a header of its own; the
	// egress puts the value there, and in Authorization.
	code := `import os, urllib.request
t = os.environ["TOKEN"]
print(t.startswith("SANDBOX_RUN_SECRET_TOKEN_"), len(t) > 30)
req = urllib.request.Request("http://` + allow + `/x", headers={"X-Token": t})
print(urllib.request.urlopen(req, timeout=30).read().decode())`
	wantUpstream := "Bearer " + value + "|" + value + "|/x"

	t.Run("execute --server", func(t *testing.T) {
		r := cliEnv(t, nil, "", "execute", "--server", srv.url, "--secret", "TOKEN", "--allow-net", allow, "-l", "python", "-c", code, "-o", "json")
		noValue("execute --server -o json", r)
		var res wire.Result
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Stdout != "True True\nok\n" {
			t.Fatalf("execute --server --secret: %+v\nserver:\n%s", r, srv.stderr)
		}
		if n := res.Network; n == nil || len(n.Requests) != 1 || n.Requests[0].Status != 200 || strings.Join(n.Requests[0].Secrets, ",") != "TOKEN" {
			t.Errorf("network.requests: %+v", res.Network)
		}
		if g := upstreamGot(); len(g) != 1 || g[0] != wantUpstream {
			t.Errorf("the upstream got %q, want %q", g, wantUpstream)
		}
		// Text mode, as streamed.
		r = cliEnv(t, nil, "", "execute", "--server", srv.url, "--secret", "TOKEN", "--allow-net", allow, "-l", "python", "-c", code)
		noValue("execute --server", r)
		if r.code != 0 || r.stdout != "True True\nok\n" {
			t.Errorf("execute --server --secret (text): %+v", r)
		}
		upstreamGot()
		// A secret the key lacks; one without a network.
		r = cliEnv(t, nil, "", "execute", "--server", srv.url, "--secret", "NOPE", "--allow-net", allow, "-l", "python", "-c", "1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "NOPE") {
			t.Errorf("execute --server --secret NOPE: %+v", r)
		}
		r = cliEnv(t, nil, "", "execute", "--server", srv.url, "--secret", "TOKEN", "-l", "python", "-c", "1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "network") {
			t.Errorf("execute --server --secret without --allow-net: %+v", r)
		}
	})

	t.Run("execute locally", func(t *testing.T) {
		// The data dir's secrets are its keyless owner's: the server's here.
		r := cliEnv(t, nil, "", "execute", "--data-dir", data, "--secret", "TOKEN", "--allow-net", allow, "-l", "python", "-c", code)
		noValue("execute --secret", r)
		if r.code != 0 || r.stdout != "True True\nok\n" {
			t.Fatalf("execute --secret (local): %+v", r)
		}
		if g := upstreamGot(); len(g) != 1 || g[0] != wantUpstream {
			t.Errorf("the upstream got %q, want %q", g, wantUpstream)
		}
		r = cliEnv(t, nil, "", "execute", "--data-dir", data, "--secret", "NOPE", "--allow-net", allow, "-l", "python", "-c", "1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "NOPE") {
			t.Errorf("execute --secret NOPE (local): %+v", r)
		}
		r = cliEnv(t, nil, "", "execute", "--data-dir", data, "--secret", "TOKEN", "-l", "python", "-c", "1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "network") {
			t.Errorf("execute --secret without --allow-net (local): %+v", r)
		}
		// Another data dir has none of them.
		r = cliEnv(t, nil, "", "execute", "--data-dir", t.TempDir(), "--secret", "TOKEN", "--allow-net", allow, "-l", "python", "-c", "1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "TOKEN") {
			t.Errorf("execute --secret on another data dir: %+v", r)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			stdin string
			args  []string
			code  int
			msg   string
		}{
			// The server's 400, with its message.
			{"v", []string{"put", "1BAD", "--host", "example.com"}, exitUsage, "name"},
			{"v", []string{"put", "BADHOST", "--host", "exa mple.com"}, exitUsage, "hosts[0]"},
			{"v", []string{"put", "HDR", "--host", "example.com", "--header", "Host"}, exitUsage, "header.name"},
			// The command line's own.
			{"v", []string{"put", "TOKEN", value, "--host", "example.com"}, exitUsage, "never from the command line"},
			{"", []string{"put", "EMPTY", "--host", "example.com"}, exitUsage, "empty"},
			{"\n", []string{"put", "EMPTY", "--host", "example.com"}, exitUsage, "empty"},
			{"a\nb\n", []string{"put", "TWO", "--host", "example.com"}, exitUsage, "more than one line"},
			{"v", []string{"put", "NOHOST"}, exitUsage, "--host"},
			{"v", []string{"put", "F", "--host", "example.com", "--header-format", "{value}"}, exitUsage, "--header-format needs --header"},
			{"", []string{"put", "F", "--host", "example.com", "--from-file", "/no/such/file"}, 1, "--from-file"},
			{"", []string{"ls", "extra"}, exitUsage, "no arguments"},
			{"", []string{"rm"}, exitUsage, "names"},
			{"", []string{"frobnicate"}, exitUsage, "unknown secrets command"},
			{"", []string{"ls", "--server", "http://127.0.0.1:1"}, exitSetup, "cannot reach server"},
		} {
			r := run(c.stdin, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
				t.Errorf("%q: exit %d stderr %q; want exit %d and %q", c.args, r.code, r.stderr, c.code, c.msg)
			}
			noValue(strings.Join(c.args, " "), r)
		}
		if r := run("", "ls"); strings.Contains(r.stdout, "EMPTY") || strings.Contains(r.stdout, "1BAD") || strings.Contains(r.stdout, "TWO") {
			t.Errorf("a refused put was stored: %+v", r)
		}
	})

	t.Run("put on a terminal", func(t *testing.T) {
		master, slave := openPTY(t)
		defer master.Close()
		cmd := cliCommand(t, env, "secrets", "put", "TTY", "--host", "example.com")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		var tty syncBuffer
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			io.Copy(&tty, master)
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(tty.String(), "not shown") {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no prompt: %q", tty.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		io.WriteString(master, "typed-"+value+"\n")
		err := cmd.Wait()
		master.Close()
		<-copied
		if err != nil || strings.Contains(tty.String(), value) {
			t.Errorf("put on a terminal: %v, the terminal shows %q", err, tty.String())
		}
		if r := run("", "ls"); !regexp.MustCompile(`(?m)^TTY +example\.com `).MatchString(r.stdout) {
			t.Errorf("ls after the put on a terminal: %+v", r)
		}
	})

	// rm: several at once; a second time, no such secret (exit 1).
	if r := run("", "rm", "TOKEN", "OTHER", "TTY"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("rm: %+v", r)
	}
	if r := run("", "ls"); r.code != 0 || r.stdout != "no secrets\n" {
		t.Errorf("ls after rm: %+v", r)
	}
	if r := run("", "ls", "-o", "json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ls -o json after rm: %+v", r)
	}
	if r := run("", "rm", "TOKEN"); r.code != 1 || !strings.Contains(r.stderr, "no such secret TOKEN") {
		t.Errorf("rm of a deleted secret: %+v", r)
	}
	r = cliEnv(t, nil, "", "execute", "--server", srv.url, "--secret", "TOKEN", "--allow-net", allow, "-l", "python", "-c", code)
	if r.code != exitUsage || !strings.Contains(r.stderr, "TOKEN") {
		t.Errorf("execute --secret of a deleted secret: %+v", r)
	}
	if strings.Contains(srv.stderr.String(), value) {
		t.Error("the server's log holds the value")
	}
}

// TestSecretsCLIDocs runs docs/CLI.md's secrets example as it is written,
// against a server that allows host.sandbox.internal on the port of a
// listener of this host standing for the docs' 8000, which accepts the
// token only in its Authorization header.
func TestSecretsCLIDocs(t *testing.T) {
	b := make([]byte, 12)
	rand.Read(b)
	token := "tok-" + hex.EncodeToString(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Path != "/whoami" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "token accepted")
	})}
	go upstream.Serve(ln)
	t.Cleanup(func() { upstream.Close() })
	hostPort := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)

	srv := startServe(t, []string{"SANDBOX_RUN_NETWORK_ALLOW=" + hostPort})
	t.Setenv("SANDBOX_RUN_SERVER", srv.url)
	t.Setenv("SANDBOX_RUN_API_KEY", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token.txt"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	block := docBlock(t, "docs/CLI.md", "## Secrets", "console")
	if ex := consoleExamples(block); len(ex) != 5 || !strings.Contains(ex[2].cmd, "--secret API_TOKEN") || !strings.Contains(block, "host.sandbox.internal:8000") {
		t.Fatalf("the secrets example changed: %q", ex)
	}
	runConsole(t, dir, srv.url, strings.ReplaceAll(block, "host.sandbox.internal:8000", hostPort))
	if strings.Contains(srv.stderr.String(), token) {
		t.Error("the server's log holds the value")
	}
}
