package secretcmd

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The test binary doubles as the command: run with SECRETCMD_TEST_CLI=1
// it is `sandbox-run secrets ARGS`, so that the tests see its exit code,
// stdout and stderr as a user does.
func TestMain(m *testing.M) {
	if os.Getenv("SECRETCMD_TEST_CLI") == "1" {
		os.Exit(Run(os.Args[1:], cli.NewConsole(os.Stdout, os.Stderr)))
	}
	for _, v := range []string{"SANDBOX_RUN_SERVER", "SANDBOX_RUN_API_KEY"} {
		os.Unsetenv(v)
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the command with args, stdin as its standard input and env
// added to its environment.
func run(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "SECRETCMD_TEST_CLI=1"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// startServer serves the real API (pkg/api, its secret store under a
// data dir of the test's; none when dataDir is false) with two keys, a
// and b; it runs nothing, so it has no backend.
func startServer(t *testing.T, dataDir bool) string {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.DataDir = ""
	if dataDir {
		cfg.DataDir = t.TempDir()
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Live.Ready = -1
	cfg.Keys = []api.APIKey{{ID: "a", Key: "key-of-a", Scopes: []string{api.ScopeExecute}}, {ID: "b", Key: "key-of-b", Scopes: []string{api.ScopeExecute}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api.New(cfg, nil, slog.New(slog.DiscardHandler)).Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestSecrets(t *testing.T) {
	url := startServer(t, true)
	a := []string{"SANDBOX_RUN_SERVER=" + url, "SANDBOX_RUN_API_KEY=key-of-a"}
	b := []string{"SANDBOX_RUN_SERVER=" + url, "SANDBOX_RUN_API_KEY=key-of-b"}
	buf := make([]byte, 16)
	rand.Read(buf)
	value := "sk-" + hex.EncodeToString(buf)
	noValue := func(what string, r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, value) {
			t.Errorf("%s prints the value: %+v", what, r)
		}
	}

	r := run(t, a, value+"\n", "put", "TOKEN", "--host", "api.example.com", "--host", "*.example.org:8443", "--header", "Authorization", "--header-format", "Bearer {value}")
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("put: %+v", r)
	}
	// Flags before the command, as the common ones may come; -o json.
	r = run(t, a, value, "-o", "json", "put", "PLAIN", "--host", "example.com")
	var sec wire.Secret
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sec) != nil || sec.Name != "PLAIN" || sec.Header != nil || sec.Created.IsZero() {
		t.Errorf("put -o json: %+v", r)
	}
	noValue("put -o json", r)
	file := filepath.Join(t.TempDir(), "v")
	os.WriteFile(file, []byte(value+"\r\n"), 0o600)
	if r := run(t, a, "", "put", "FROMFILE", "--from-file", file, "--host", "example.com", "--header", "X-Key"); r.code != 0 {
		t.Errorf("put --from-file: %+v", r)
	}

	r = run(t, a, "", "ls")
	noValue("ls", r)
	for _, re := range []string{
		`^NAME +HOSTS +HEADER +UPDATED\n`,
		`(?m)^TOKEN +api\.example\.com,\*\.example\.org:8443 +Authorization: Bearer \{value\} +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`,
		`(?m)^PLAIN +example\.com +- +\d{4}-`,
		`(?m)^FROMFILE +example\.com +X-Key: \{value\} +\d{4}-`,
	} {
		if r.code != 0 || !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("ls lacks %s: %+v", re, r)
		}
	}
	r = run(t, a, "", "ls", "--output-format", "json")
	noValue("ls -o json", r)
	var all []wire.Secret
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &all) != nil || len(all) != 3 {
		t.Errorf("ls -o json: %+v", r)
	}
	// Another key sees none of them, and cannot delete them.
	if r := run(t, b, "", "ls"); r.code != 0 || r.stdout != "no secrets\n" {
		t.Errorf("b's ls: %+v", r)
	}
	if r := run(t, b, "", "ls", "-o", "json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("b's ls -o json: %+v", r)
	}
	if r := run(t, b, "", "rm", "TOKEN"); r.code != exitFailed || r.stderr != "sandbox-run: no such secret TOKEN\n" {
		t.Errorf("b's rm: %+v", r)
	}

	// rm goes on past a missing one; the exit code is the worst.
	if r := run(t, a, "", "rm", "PLAIN", "MISSING", "FROMFILE"); r.code != exitFailed || !strings.Contains(r.stderr, "no such secret MISSING") {
		t.Errorf("rm with a missing one: %+v", r)
	}
	if r := run(t, a, "", "ls"); r.code != 0 || strings.Contains(r.stdout, "PLAIN") || strings.Contains(r.stdout, "FROMFILE") || !strings.Contains(r.stdout, "TOKEN") {
		t.Errorf("ls after rm: %+v", r)
	}
	if r := run(t, a, "", "delete", "TOKEN"); r.code != 0 {
		t.Errorf("delete: %+v", r)
	}
	if r := run(t, a, "", "list"); r.code != 0 || r.stdout != "no secrets\n" {
		t.Errorf("list after delete: %+v", r)
	}
}

func TestErrors(t *testing.T) {
	url := startServer(t, true)
	a := []string{"SANDBOX_RUN_SERVER=" + url, "SANDBOX_RUN_API_KEY=key-of-a"}
	long := strings.Repeat("x", secrets.MaxValue+1)
	for _, c := range []struct {
		name  string
		env   []string
		stdin string
		args  []string
		code  int
		msg   string
	}{
		{"the server's 400", a, "v", []string{"put", "1BAD", "--host", "example.com"}, exitUsage, "sandbox-run: invalid secret: name: "},
		{"a bad host", a, "v", []string{"put", "H", "--host", "bad host"}, exitUsage, "hosts[0]"},
		{"a reserved header", a, "v", []string{"put", "H", "--host", "example.com", "--header", "Content-Length"}, exitUsage, "header.name"},
		{"a format without {value}", a, "v", []string{"put", "H", "--host", "example.com", "--header", "X", "--header-format", "Bearer"}, exitUsage, "header.format"},
		{"no key", []string{"SANDBOX_RUN_SERVER=" + url}, "", []string{"ls"}, exitUsage, "--api-key"},
		{"a wrong key", []string{"SANDBOX_RUN_SERVER=" + url}, "", []string{"ls", "--api-key", "nope"}, exitUsage, "--api-key"},
		{"unreachable", nil, "", []string{"ls", "--server", "http://127.0.0.1:1"}, exitSetup, "cannot reach server http://127.0.0.1:1"},
		{"a bad server", nil, "", []string{"ls", "--server", "ftp://x"}, exitUsage, "--server wants an http:// or https:// URL"},
		{"a bad format", a, "", []string{"ls", "-o", "xml"}, exitUsage, "--output-format must be text or json"},
		{"the value in argv", a, "", []string{"put", "H", "s3cr3t-in-argv", "--host", "example.com"}, exitUsage, "never from the command line"},
		{"no name", a, "v", []string{"put", "--host", "example.com"}, exitUsage, "wants the secret's NAME"},
		{"no host", a, "v", []string{"put", "H"}, exitUsage, "wants --host"},
		{"an empty value", a, "", []string{"put", "H", "--host", "example.com"}, exitUsage, "is empty"},
		{"a newline alone", a, "\r\n", []string{"put", "H", "--host", "example.com"}, exitUsage, "is empty"},
		{"two lines", a, "a\nb", []string{"put", "H", "--host", "example.com"}, exitUsage, "more than one line"},
		{"a NUL", a, "a\x00b", []string{"put", "H", "--host", "example.com"}, exitUsage, "NUL"},
		{"no UTF-8", a, "a\xffb", []string{"put", "H", "--host", "example.com"}, exitUsage, "not UTF-8"},
		{"too long", a, long, []string{"put", "H", "--host", "example.com"}, exitUsage, "longer than 16384 bytes"},
		{"no such file", a, "", []string{"put", "H", "--host", "example.com", "--from-file", "/no/such/file"}, exitFailed, "--from-file"},
		{"a format alone", a, "v", []string{"put", "H", "--host", "example.com", "--header-format", "{value}"}, exitUsage, "needs --header"},
		{"an unknown flag", a, "v", []string{"put", "H", "--value", "x"}, exitUsage, "unknown flag --value"},
		{"no command", a, "", nil, exitUsage, "wants a command"},
		{"an unknown command", a, "", []string{"show"}, exitUsage, "unknown secrets command"},
		{"ls with words", a, "", []string{"ls", "x"}, exitUsage, "no arguments"},
		{"rm without names", a, "", []string{"rm"}, exitUsage, "wants the names"},
	} {
		r := run(t, c.env, c.stdin, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) || r.stdout != "" {
			t.Errorf("%s %q: exit %d stdout %q stderr %q; want exit %d and %q", c.name, c.args, r.code, r.stdout, r.stderr, c.code, c.msg)
		}
		if strings.Contains(r.stderr, "s3cr3t-in-argv") || strings.Contains(r.stderr, long) {
			t.Errorf("%s: the value is in the message: %q", c.name, r.stderr)
		}
	}
	if r := run(t, a, "", "ls"); r.stdout != "no secrets\n" {
		t.Errorf("a refused put was stored: %+v", r)
	}

	// A server without a data dir keeps no secrets: 503, as a server
	// that cannot serve (125).
	none := startServer(t, false)
	r := run(t, []string{"SANDBOX_RUN_API_KEY=key-of-a"}, "v", "put", "H", "--host", "example.com", "--server", none)
	if r.code != exitSetup || !strings.Contains(r.stderr, "keeps no secrets") {
		t.Errorf("a server without a data dir: %+v", r)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}} {
		if r := run(t, nil, "", args...); r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: sandbox-run secrets COMMAND") || !strings.Contains(r.stdout, "Exit codes:") {
			t.Errorf("%q: %+v", args, r)
		}
	}
	for _, sub := range []string{"put", "ls", "rm"} {
		for _, args := range [][]string{{sub, "-h"}, {"help", sub}} {
			r := run(t, nil, "", args...)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: sandbox-run secrets "+sub) || !strings.Contains(r.stdout, "--server") {
				t.Errorf("%q: %+v", args, r)
			}
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("%q: default given twice: %q", args, line)
				}
			}
		}
	}
	if r := run(t, nil, "", "put", "-h"); !strings.Contains(r.stdout, "standard input") || !strings.Contains(r.stdout, "--from-file") || !strings.Contains(r.stdout, "--header-format") {
		t.Errorf("put -h: %s", r.stdout)
	}
}
