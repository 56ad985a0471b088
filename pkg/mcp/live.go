package mcp

// Live sandboxes (pkg/live) as MCP tools: sandbox_create, sandbox_exec,
// sandbox_write_file, sandbox_read_file, sandbox_list_files, sandbox_kill
// and sandbox_list. A live sandbox stays up between calls (until its
// timeout or sandbox_kill): its files, and the processes left running in
// it, persist. Each belongs to its caller: the API key over HTTP (another
// key's is "no such sandbox"), the process's user over stdio. Every
// refusal is a tool error (isError) whose text says why.

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// LiveCreateInput is the input of sandbox_create.
type LiveCreateInput struct {
	Languages      []string          `json:"languages,omitempty" jsonschema:"languages whose toolchains the sandbox has on its PATH, e.g. [\"python\", \"go\"] (see list_languages); default: python, javascript and bash"`
	Template       string            `json:"template,omitempty" jsonschema:"what to make the sandbox from when languages is not given: base (the default languages), code-interpreter-v1 (python, javascript, bash), a language's name (that language and bash) or names joined with + (python+go: both, and bash)"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"the sandbox's life in seconds: it ends (files and processes gone) this long after its creation (default: the server's, 300 unless configured; the server has a maximum)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables every command in the sandbox gets: name to value"`
	Metadata       map[string]string `json:"metadata,omitempty" jsonschema:"labels of your own that sandbox_list shows: name to value"`
	NetworkAllow   []string          `json:"network_allow,omitempty" jsonschema:"what the sandbox's network may reach: host names (*.example.com for subdomains), IP addresses or CIDRs, each with an optional :PORT, within what the server allows; default: no network at all (sandbox_set_network changes it later, for a sandbox created with one)"`
	NetworkBudgets map[string]int64  `json:"network_budgets,omitempty" jsonschema:"bytes (both ways, over all its connections) the sandbox may move with what one entry allows, by the entry as written in network_allow: {\"*.pythonhosted.org:443\": 200000000}; past one, its connections are reset and new ones refused"`
	Secrets        []string          `json:"secrets,omitempty" jsonschema:"names of the API key's secrets (list_secrets lists them) its processes use without seeing them: each process finds a placeholder in the environment variable of the secret's name, and the server puts the value in its place in HTTP(S) requests to the secret's hosts; needs network_allow listing those hosts"`
	Image          string            `json:"image,omitempty" jsonschema:"an OCI image (e.g. python:3.12-slim) whose root filesystem the sandbox has, with the image's own programs, if the server allows it; languages and template are then ignored"`
	IdlePause      float64           `json:"idle_pause_seconds,omitempty" jsonschema:"pause the sandbox once nobody has used it for this many seconds (its processes running by themselves do not count); any sandbox_ call resumes it; default: the server's (usually never)"`
	Snapshot       string            `json:"snapshot,omitempty" jsonschema:"a snapshot of yours (sandbox_snapshot) to start from: its files, and its running processes when it kept them; the sandbox is made as the snapshot's was"`
	Isolation      string            `json:"isolation,omitempty" jsonschema:"its wall: native, or gvisor (gVisor's kernel; its forks carry its running processes and memory; no network or image yet); default: gvisor for code-interpreter-v1 where the server has it, else native"`
}

// LiveSandbox describes a live sandbox.
type LiveSandbox struct {
	ID        string            `json:"id" jsonschema:"the sandbox's id: give it as sandbox_id to the other sandbox_ tools"`
	EndAt     string            `json:"end_at" jsonschema:"when the sandbox ends by itself (RFC 3339, UTC): its files and processes are gone then"`
	StartedAt string            `json:"started_at" jsonschema:"when it was created (RFC 3339, UTC)"`
	Languages []string          `json:"languages" jsonschema:"the languages whose toolchains it has on its PATH"`
	Template  string            `json:"template,omitempty" jsonschema:"what it was made from"`
	Metadata  map[string]string `json:"metadata,omitempty" jsonschema:"its labels, as given to sandbox_create"`
	Network   []string          `json:"network,omitempty" jsonschema:"what its network may reach (absent: nothing, as it was created without network_allow or sandbox_set_network gave it none)"`
	Budgets   map[string]int64  `json:"network_budgets,omitempty" jsonschema:"the bytes its network may move by entry of network"`
	Secrets   []string          `json:"secrets,omitempty" jsonschema:"the secrets its processes use, by name (placeholders in the environment variables of their names)"`
	Image     string            `json:"image,omitempty" jsonschema:"the OCI image its root is (absent: the host's toolchains)"`
	State     string            `json:"state" jsonschema:"running, or paused (sandbox_pause): any sandbox_ call resumes it"`
	Evicted   bool              `json:"evicted,omitempty" jsonschema:"paused and written to disk, its memory given back (sandbox_pause with evict): any sandbox_ call brings it back"`
	Isolation string            `json:"isolation" jsonschema:"its wall: native or gvisor"`
}

// LiveIDInput names a live sandbox.
type LiveIDInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create (or sandbox_list)"`
}

// LiveListInput is the (empty) input of sandbox_list.
type LiveListInput struct{}

// LiveListOutput is the output of sandbox_list.
type LiveListOutput struct {
	Sandboxes []LiveSandbox `json:"sandboxes" jsonschema:"your live sandboxes, oldest first"`
}

// LiveExecInput is the input of sandbox_exec.
type LiveExecInput struct {
	SandboxID      string            `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create"`
	Command        string            `json:"command" jsonschema:"a bash command line, run as bash -l -c COMMAND: pipes, redirections, &&, ; and several lines all work, e.g. \"pip list | head\" or \"cd src && go build ./...\""`
	Cwd            string            `json:"cwd,omitempty" jsonschema:"the directory it runs in; a relative path is relative to /work (default /work, the sandbox's home directory)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables for this command, over the sandbox's: name to value"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the command (default 60): past it the command (its whole process group) is killed and timed_out is true"`
}

// LiveExecOutput is the output of sandbox_exec.
type LiveExecOutput struct {
	ExitCode        int     `json:"exit_code" jsonschema:"the command's exit code; -1 when a signal ended it (as when it timed out)"`
	Stdout          string  `json:"stdout" jsonschema:"its standard output (its first 1 MiB; bytes that are not UTF-8 text are replaced by U+FFFD: pipe binary output through base64)"`
	Stderr          string  `json:"stderr" jsonschema:"its standard error (its first 1 MiB, as stdout)"`
	StdoutTruncated bool    `json:"stdout_truncated" jsonschema:"true when stdout was longer than 1 MiB and was cut"`
	StderrTruncated bool    `json:"stderr_truncated" jsonschema:"true when stderr was longer than 1 MiB and was cut"`
	TimedOut        bool    `json:"timed_out" jsonschema:"true when the command ran past timeout_seconds and was killed"`
	Status          string  `json:"status,omitempty" jsonschema:"how it ended, e.g. exit status 3 or signal: killed"`
	DurationMs      float64 `json:"duration_ms" jsonschema:"wall-clock time of the command in milliseconds"`
}

// LiveWriteInput is the input of sandbox_write_file.
type LiveWriteInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create"`
	Path      string `json:"path" jsonschema:"the file's path; a relative path is relative to /work. Missing parent directories are made; an existing file is replaced"`
	Content   string `json:"content" jsonschema:"the file's content: text, or the bytes in base64 when base64 is true"`
	Base64    bool   `json:"base64,omitempty" jsonschema:"true when content is base64 (standard alphabet) of the file's bytes, for binary files"`
}

// LiveWriteOutput is the output of sandbox_write_file.
type LiveWriteOutput struct {
	Path string `json:"path" jsonschema:"the file's absolute path in the sandbox"`
	Size int64  `json:"size" jsonschema:"its size in bytes"`
}

// LiveReadInput is the input of sandbox_read_file.
type LiveReadInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create"`
	Path      string `json:"path" jsonschema:"the file's path; a relative path is relative to /work"`
}

// LiveReadOutput is the output of sandbox_read_file.
type LiveReadOutput struct {
	Path      string `json:"path" jsonschema:"the file's absolute path in the sandbox"`
	Content   string `json:"content" jsonschema:"the file's content (its first 1 MiB): text, or base64 when base64 is true"`
	Base64    bool   `json:"base64" jsonschema:"true when the file is not UTF-8 text: content is then its bytes in base64"`
	Size      int64  `json:"size" jsonschema:"the file's size in bytes (0 for special files such as those of /proc)"`
	Truncated bool   `json:"truncated" jsonschema:"true when the file is longer than what content holds (1 MiB): read the rest with sandbox_exec (tail -c, sed -n, ...)"`
}

// LiveListFilesInput is the input of sandbox_list_files.
type LiveListFilesInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create"`
	Path      string `json:"path,omitempty" jsonschema:"the directory to list; a relative path is relative to /work (default /work)"`
	Depth     int    `json:"depth,omitempty" jsonschema:"how many levels to list: 1 (the default) lists the directory's own entries, 2 those of its subdirectories too, and so on (at most 10)"`
}

// LiveEntry is a file, directory or symlink of a live sandbox.
type LiveEntry struct {
	Name string `json:"name" jsonschema:"its name"`
	Path string `json:"path" jsonschema:"its absolute path"`
	Type string `json:"type" jsonschema:"file, dir or symlink"`
	Size int64  `json:"size" jsonschema:"its size in bytes"`
}

// LiveListFilesOutput is the output of sandbox_list_files.
type LiveListFilesOutput struct {
	Path      string      `json:"path" jsonschema:"the directory listed (absolute)"`
	Entries   []LiveEntry `json:"entries" jsonschema:"its entries, and those of its subdirectories down to depth, each directory's after it"`
	Truncated bool        `json:"truncated" jsonschema:"true when there were more than 2000 entries and only the first 2000 are given: list a subdirectory, or with less depth"`
}

// LiveKillOutput is the output of sandbox_kill.
type LiveKillOutput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox"`
	Killed    bool   `json:"killed" jsonschema:"true: the sandbox, its processes and its files are gone"`
}

// Bounds of the live tools.
const (
	liveHome           = "/work"          // where relative paths lead
	liveExecTimeout    = 60 * time.Second // sandbox_exec's default
	liveMaxExecTimeout = 24 * time.Hour   // the longest sandbox_exec waits
	liveMaxOutput      = 1 << 20          // of stdout and of stderr each
	liveMaxWrite       = 64 << 20         // a file written at once (the agent's frames are at most 96 MiB)
	liveMaxEntries     = 2000             // entries sandbox_list_files gives
	liveMaxDepth       = 10               // levels it lists
	liveMaxTimeoutSecs = float64(1e9)     // beyond any server's maximum, within a time.Duration
	liveReadTimeout    = 30 * time.Second // for a file's first bytes to come through head (a FIFO may give none)
	liveSymlinkHops    = 16               // links sandbox_read_file follows
	liveMaxTextFile    = maxReadBytes     // the most of a file sandbox_read_file gives (and reads whole through the agent)
	liveNoLive         = "this server runs no live sandboxes (its runs go to a cluster, or it has no sandbox engine here): use execute_code, or sessions (create_session) to keep files between runs"
)

func (s *Server) addLiveTools() {
	no, yes := false, true
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_create", Title: "Create a live sandbox",
		Description: "Create a live sandbox: a Linux machine of your own (no network) that stays up between calls until its timeout " +
			"(end_at) or sandbox_kill. Run shell commands in it with sandbox_exec, and move files in and out with sandbox_write_file, " +
			"sandbox_read_file and sandbox_list_files; files (in /work, its home directory, or anywhere it may write) and " +
			"background processes persist from one call to the next. Returns its id, to give as sandbox_id. " +
			"Kill it with sandbox_kill when done.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, s.liveCreate)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_exec", Title: "Run a command in a live sandbox",
		Description: "Run a shell command in a live sandbox (bash -l -c COMMAND, in /work unless cwd says otherwise) and wait for it: " +
			"returns its exit code, stdout and stderr (1 MiB of each at most), and timed_out when it ran past timeout_seconds " +
			"(default 60) and was killed. A command that fails is a normal result (see exit_code), not an error. What it writes " +
			"to the sandbox's files stays for the next commands; to leave a server running, start it in the background " +
			"(nohup CMD > log 2>&1 &).",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}}, s.liveExec)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_write_file", Title: "Write a file in a live sandbox",
		Description: "Write a file in a live sandbox (parent directories are made, an existing file is replaced): text, " +
			"or binary content in base64 with base64: true. Relative paths are relative to /work.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}}, s.liveWriteFile)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_read_file", Title: "Read a file of a live sandbox",
		Description: "Read a file of a live sandbox: its content as text, or in base64 (base64: true) when it is not UTF-8 text; " +
			"at most its first 1 MiB (truncated says so). Relative paths are relative to /work.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.liveReadFile)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_list_files", Title: "List files of a live sandbox",
		Description: "List a directory of a live sandbox (default /work; relative paths are relative to /work): each entry's " +
			"name, path, type (file, dir, symlink) and size, down to depth levels (default 1).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.liveListFiles)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_kill", Title: "Kill a live sandbox",
		Description: "End a live sandbox now: its processes are killed and its files deleted.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}}, s.liveKill)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_list", Title: "List live sandboxes",
		Description: "Your live sandboxes: their ids, state (running or paused), when each ends, languages and metadata.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.liveList)
}

// liveCaller is who makes a call (bound by bind) and the server's live
// sandboxes, or a tool error saying why there are none for it.
func (s *Server) liveCaller(ctx context.Context) (runner.Caller, *live.Manager, error) {
	m := s.svc.Live()
	if m == nil {
		return runner.Caller{}, nil, errors.New(liveNoLive)
	}
	c := runner.CallerOf(ctx)
	if !s.stdio && len(s.cfg.Keys) > 0 && c.Key == nil {
		// Never the keyless tenant on a server with keys: the route
		// authenticates every call, so this is a call that bypassed it.
		return runner.Caller{}, nil, errors.New("this call carries no API key: send Authorization: Bearer <key>")
	}
	return c, m, nil
}

// liveSandbox is the caller's sandbox id.
func (s *Server) liveSandbox(ctx context.Context, id string) (*live.Sandbox, error) {
	c, _, err := s.liveCaller(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.svc.CheckCaller(c); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errors.New("sandbox_id is empty: give the id sandbox_create returned (sandbox_list lists your sandboxes)")
	}
	sb, err := s.svc.LiveSandbox(c, id)
	if err != nil {
		if runner.KindOf(err) == runner.NotFound {
			return nil, noSuchSandbox(id)
		}
		return nil, err
	}
	return sb, nil
}

func noSuchSandbox(id string) error {
	return fmt.Errorf("no such sandbox %q (it ended, it was killed, or it is not yours): sandbox_list lists yours, sandbox_create makes one", id)
}

// liveCallError is an error of the sandbox's agent in the tools' words.
func liveCallError(err error) error {
	var le *live.Error
	switch {
	case errors.As(err, &le):
		return errors.New(le.Msg)
	case errors.Is(err, live.ErrGone):
		return errors.New("the sandbox has ended (its timeout passed, or it was killed): sandbox_create makes another")
	}
	return err
}

// livePath is p in the sandbox: relative to its home directory.
func livePath(p string) string {
	if p == "" {
		return liveHome
	}
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(liveHome, p)
}

// liveEnv is env as the agent takes it (NAME=value, sorted), or an error
// naming a variable that cannot be.
func liveEnv(env map[string]string) ([]string, error) {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(env[k], 0) {
			return nil, fmt.Errorf("env: %q is not an environment variable's name (or its value holds a NUL)", k)
		}
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// liveSeconds is a tool's seconds as a duration (0 when not given), refused
// when negative or absurd.
func liveSeconds(name string, secs float64) (time.Duration, error) {
	if secs < 0 || secs > liveMaxTimeoutSecs {
		return 0, fmt.Errorf("%s: %g is not a number of seconds a sandbox can have", name, secs)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// liveInfo describes sb (made with no languages: it has the defaults).
func (s *Server) liveInfo(sb *live.Sandbox) LiveSandbox {
	langs := sb.Languages
	if len(langs) == 0 && sb.Image == "" { // an image's are its own
		base, _ := s.svc.LiveTemplate("base")
		langs = base.Languages
	}
	return LiveSandbox{ID: sb.ID, EndAt: sb.End().UTC().Format(time.RFC3339), StartedAt: sb.Started.UTC().Format(time.RFC3339),
		Languages: slices.Clone(langs), Template: sb.Template, Metadata: sb.Metadata, Network: sb.Network, Budgets: sb.NetworkBudgets, Secrets: sb.Secrets, Image: sb.Image,
		State: sb.State(), Evicted: sb.Evicted(), Isolation: cmp.Or(sb.Isolation, "native")}
}

// liveLanguages are the toolchains a sandbox asked for in gets, by their
// names: those installed of names (an error for any that is not), or of
// the template's (the run service's: the languages it names, each
// wanted; base's and the code interpreter's, those not installed left
// out).
func (s *Server) liveLanguages(names []string, template string) ([]string, error) {
	explicit := len(names) > 0
	if !explicit {
		tpl, err := s.svc.LiveTemplate(template)
		if err != nil {
			return nil, fmt.Errorf("%v, or languages (list_languages lists them)", err)
		}
		names, explicit = tpl.Languages, !tpl.Default && !tpl.Interpreter
	}
	var out []string
	for _, name := range names {
		l, ok := s.svc.Lookup(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown language %q: list_languages says what is installed", name)
		case !l.Available && explicit && name != "bash":
			return nil, fmt.Errorf("language %q is not installed on this server: list_languages says what is", name)
		case !l.Available || slices.Contains(out, l.Name):
			continue
		}
		out = append(out, l.Name)
	}
	return out, nil
}

func (s *Server) liveCreate(ctx context.Context, req *sdk.CallToolRequest, in LiveCreateInput) (*sdk.CallToolResult, LiveSandbox, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	c, _, err := s.liveCaller(ctx)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	langs, err := s.liveLanguages(in.Languages, in.Template)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	if _, err := liveEnv(in.Env); err != nil {
		return nil, LiveSandbox{}, err
	}
	timeout, err := liveSeconds("timeout_seconds", in.TimeoutSeconds)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	tpl := in.Template
	if tpl == "" {
		tpl = "base"
	}
	// Languages are given even when they are the defaults: the sandbox
	// then says which it has.
	o := live.CreateOptions{Languages: langs, Env: in.Env, Metadata: in.Metadata, Timeout: timeout, Template: tpl, Isolation: in.Isolation, Snapshot: in.Snapshot}
	if o.IdlePause, err = liveSeconds("idle_pause_seconds", in.IdlePause); err != nil {
		return nil, LiveSandbox{}, err
	}
	if in.Snapshot != "" && len(in.Languages) == 0 && in.Template == "" {
		o.Languages, o.Template = nil, "" // the snapshot's
	}
	if in.NetworkAllow != nil {
		o.Network, o.NetworkBudgets = append([]string{}, in.NetworkAllow...), in.NetworkBudgets
	}
	if len(in.Secrets) > 0 {
		o.Secrets = slices.Clone(in.Secrets)
	}
	if in.Image != "" {
		o.Image, o.Languages, o.Template = in.Image, nil, in.Image
	}
	sb, err := s.svc.CreateLive(ctx, c, o)
	if err != nil {
		return nil, LiveSandbox{}, errors.New(strings.TrimPrefix(err.Error(), "live: invalid request: "))
	}
	return nil, s.liveInfo(sb), nil
}

func (s *Server) liveList(ctx context.Context, req *sdk.CallToolRequest, _ LiveListInput) (*sdk.CallToolResult, LiveListOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	c, m, err := s.liveCaller(ctx)
	if err != nil {
		return nil, LiveListOutput{}, err
	}
	out := LiveListOutput{Sandboxes: []LiveSandbox{}}
	for _, sb := range m.List(c.Tenant()) {
		out.Sandboxes = append(out.Sandboxes, s.liveInfo(sb))
	}
	return nil, out, nil
}

func (s *Server) liveKill(ctx context.Context, req *sdk.CallToolRequest, in LiveIDInput) (*sdk.CallToolResult, LiveKillOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	if _, err := s.liveSandbox(ctx, in.SandboxID); err != nil {
		return nil, LiveKillOutput{}, err
	}
	if err := s.svc.KillLive(runner.CallerOf(ctx), in.SandboxID); err != nil {
		if runner.KindOf(err) == runner.NotFound {
			return nil, LiveKillOutput{}, noSuchSandbox(in.SandboxID)
		}
		return nil, LiveKillOutput{}, err
	}
	return nil, LiveKillOutput{SandboxID: in.SandboxID, Killed: true}, nil
}

func (s *Server) liveExec(ctx context.Context, req *sdk.CallToolRequest, in LiveExecInput) (*sdk.CallToolResult, LiveExecOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveExecOutput{}, err
	}
	if strings.TrimSpace(in.Command) == "" {
		return nil, LiveExecOutput{}, errors.New("command is empty: give a shell command line, e.g. \"ls -la\"")
	}
	env, err := liveEnv(in.Env)
	if err != nil {
		return nil, LiveExecOutput{}, err
	}
	timeout, err := liveSeconds("timeout_seconds", in.TimeoutSeconds)
	if err != nil {
		return nil, LiveExecOutput{}, err
	}
	if timeout == 0 {
		timeout = liveExecTimeout
	}
	timeout = min(timeout, liveMaxExecTimeout)
	start := time.Now()
	res, err := runIn(ctx, sb, agent.Request{Args: []string{"bash", "-l", "-c", in.Command}, Dir: livePath(in.Cwd), Env: env},
		live.RunOptions{MaxOutput: liveMaxOutput, Timeout: timeout})
	if err != nil {
		return nil, LiveExecOutput{}, err
	}
	return nil, LiveExecOutput{ExitCode: res.ExitCode, Stdout: strings.ToValidUTF8(string(res.Stdout), "\uFFFD"),
		Stderr: strings.ToValidUTF8(string(res.Stderr), "\uFFFD"), StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		TimedOut: res.TimedOut, Status: cmp.Or(res.Status, res.Error), DurationMs: float64(time.Since(start).Microseconds()) / 1000}, nil
}

// runIn runs r in sb to its end (live.Sandbox.Run), its failures in the
// tools' words: one that could not start, a sandbox that ended meanwhile.
func runIn(ctx context.Context, sb *live.Sandbox, r agent.Request, o live.RunOptions) (live.RunResult, error) {
	res, err := sb.Run(ctx, r, o)
	var le *live.Error
	switch {
	case errors.As(err, &le) && r.Dir != "":
		return res, fmt.Errorf("the command could not start (in %s): %s", r.Dir, le.Msg)
	case err != nil:
		return res, liveCallError(err)
	case res.Gone && res.Error == live.ErrGone.Error():
		return res, errors.New("the sandbox ended while the command ran (its timeout passed, or it was killed)")
	case res.Gone:
		return res, fmt.Errorf("the command failed: %s", res.Error)
	}
	return res, nil
}

func (s *Server) liveWriteFile(ctx context.Context, req *sdk.CallToolRequest, in LiveWriteInput) (*sdk.CallToolResult, LiveWriteOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveWriteOutput{}, err
	}
	if in.Path == "" {
		return nil, LiveWriteOutput{}, errors.New("path is empty: give the file's path (relative to /work, or absolute)")
	}
	data := []byte(in.Content)
	if in.Base64 {
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			if data, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(in.Content, "=")); err != nil {
				return nil, LiveWriteOutput{}, fmt.Errorf("content is not base64 (base64 is true): %v", err)
			}
		}
	}
	if len(data) > liveMaxWrite {
		return nil, LiveWriteOutput{}, fmt.Errorf("a file is at most %d MiB here: write it in parts (sandbox_write_file, then cat them with sandbox_exec)", liveMaxWrite>>20)
	}
	p := livePath(in.Path)
	ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpWriteFile, Path: p, Data: data, Mode: 0o644})
	if err != nil {
		return nil, LiveWriteOutput{}, liveCallError(err)
	}
	size := int64(len(data))
	if ev.Entry != nil {
		size = ev.Entry.Size
	}
	return nil, LiveWriteOutput{Path: p, Size: size}, nil
}

func (s *Server) liveReadFile(ctx context.Context, req *sdk.CallToolRequest, in LiveReadInput) (*sdk.CallToolResult, LiveReadOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveReadOutput{}, err
	}
	if in.Path == "" {
		return nil, LiveReadOutput{}, errors.New("path is empty: give the file's path (relative to /work, or absolute)")
	}
	p := livePath(in.Path)
	e, err := resolveFile(ctx, sb, p)
	if err != nil {
		return nil, LiveReadOutput{}, err
	}
	var data []byte
	if e.Type == "file" && e.Size > 0 && e.Size <= liveMaxTextFile {
		// A regular file of a known, small size: the agent reads it whole.
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpReadFile, Path: e.Path})
		if err != nil {
			return nil, LiveReadOutput{}, liveCallError(err)
		}
		data = ev.Data
	} else {
		// A large file, or one whose size says nothing (/proc, a device,
		// a pipe): its first bytes through head, never the whole of it
		// in one of the agent's frames.
		res, err := runIn(ctx, sb, agent.Request{Args: []string{"head", "-c", strconv.Itoa(liveMaxTextFile + 1), "--", e.Path}},
			live.RunOptions{MaxOutput: liveMaxTextFile + 1, Timeout: liveReadTimeout})
		switch {
		case err != nil:
			return nil, LiveReadOutput{}, err
		case res.TimedOut && len(res.Stdout) == 0:
			return nil, LiveReadOutput{}, fmt.Errorf("%s gave nothing to read within %v", e.Path, liveReadTimeout)
		case res.ExitCode != 0 && !res.TimedOut:
			return nil, LiveReadOutput{}, fmt.Errorf("reading %s: %s", e.Path, strings.TrimSpace(string(res.Stderr)))
		}
		data = res.Stdout
	}
	out := LiveReadOutput{Path: p, Size: e.Size}
	if len(data) > liveMaxTextFile {
		data, out.Truncated = data[:liveMaxTextFile], true
		// A character cut in two at the end is no reason for base64.
		for i := 1; i < utf8.UTFMax && !utf8.Valid(data); i++ {
			if utf8.Valid(data[:len(data)-i]) {
				data = data[:len(data)-i]
			}
		}
	}
	if utf8.Valid(data) {
		out.Content = string(data)
	} else {
		out.Content, out.Base64 = base64.StdEncoding.EncodeToString(data), true
	}
	return nil, out, nil
}

// resolveFile is the entry of the file p names, its symlinks followed: an
// error when there is none, or it is a directory.
func resolveFile(ctx context.Context, sb *live.Sandbox, p string) (*agent.Entry, error) {
	for range liveSymlinkHops {
		ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: p})
		var le *live.Error
		if errors.As(err, &le) && le.Kind() == wire.KindNotFound {
			return nil, fmt.Errorf("no file %s in the sandbox (sandbox_list_files lists a directory)", p)
		}
		if err != nil {
			return nil, liveCallError(err)
		}
		e := ev.Entry
		switch {
		case e == nil:
			return nil, fmt.Errorf("%s: the sandbox said nothing of it", p)
		case e.Type == "dir":
			return nil, fmt.Errorf("%s is a directory: sandbox_list_files lists it", p)
		case e.Type != "symlink":
			e.Path = p
			return e, nil
		}
		if strings.HasPrefix(e.Target, "/") {
			p = path.Clean(e.Target)
		} else {
			p = path.Join(path.Dir(p), e.Target)
		}
	}
	return nil, fmt.Errorf("%s: too many levels of symbolic links", p)
}

func (s *Server) liveListFiles(ctx context.Context, req *sdk.CallToolRequest, in LiveListFilesInput) (*sdk.CallToolResult, LiveListFilesOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveListFilesOutput{}, err
	}
	if in.Depth < 0 || in.Depth > liveMaxDepth {
		return nil, LiveListFilesOutput{}, fmt.Errorf("depth: %d levels; give 1 to %d", in.Depth, liveMaxDepth)
	}
	p := livePath(in.Path)
	ev, err := sb.Client().Call(ctx, agent.Request{Op: agent.OpListDir, Path: p, Depth: max(in.Depth, 1)})
	if err != nil {
		var le *live.Error
		if errors.As(err, &le) && le.Kind() == wire.KindNotFound {
			return nil, LiveListFilesOutput{}, fmt.Errorf("no directory %s in the sandbox", p)
		}
		return nil, LiveListFilesOutput{}, liveCallError(err)
	}
	out := LiveListFilesOutput{Path: p, Entries: []LiveEntry{}}
	for _, e := range ev.Entries {
		if len(out.Entries) == liveMaxEntries {
			out.Truncated = true
			break
		}
		out.Entries = append(out.Entries, LiveEntry{Name: e.Name, Path: e.Path, Type: e.Type, Size: e.Size})
	}
	return nil, out, nil
}
