// Package mcp serves sandbox-run to AI agents over the Model Context
// Protocol, with the official Go SDK (github.com/modelcontextprotocol/go-sdk):
// `sandbox-run mcp` speaks it on stdin and stdout, and the HTTP server at
// /mcp (streamable HTTP, stateless, behind the API keys).
//
// The tools: execute_code, list_languages, and sessions (create_session,
// run_in_session, list_session_files, read_session_file, close_session)
// whose runs share a persistent /work; list_secrets lists the secrets runs
// may name (secrets.go: no tool stores one). Requests are checked exactly as
// POST /api/sandbox/execute checks them (runner.Check, the
// server's maximums) and run through the run service. A refused request (unknown
// language, a limit above the maximum, unknown session) is a tool error
// (isError) whose text says why, not a protocol error.
package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Version is the version the server reports to MCP clients.
var Version = "dev"

// Server is sandbox-run's MCP server: the SDK's server with the tools
// added, over one run service.
type Server struct {
	cfg config.Config
	svc *runner.Service // runs every execution: admission, metrics, logs
	log *slog.Logger
	mcp *sdk.Server

	// stdio: the server of `sandbox-run mcp`, whose sessions last as long
	// as the process (and are not kept on disk).
	stdio bool
	// calls maps the id of an HTTP request being served (callHeader) to its
	// context (see bind).
	calls sync.Map
}

// New builds the server for `sandbox-run mcp`, with a run service of its
// own over x (cfg.Workers, cfg.Queue): its sessions last until Close (the
// process's life). cfg must have passed Validate.
func New(cfg config.Config, x runner.Backend, log *slog.Logger) *Server {
	rc := runner.ConfigFrom(cfg)
	rc.SessionDir = "" // sessions in memory, for the process's life
	s := newServer(cfg, runner.New(rc, x, log, nil), log)
	s.stdio = true
	return s
}

func newServer(cfg config.Config, svc *runner.Service, log *slog.Logger) *Server {
	s := &Server{cfg: cfg, svc: svc, log: log}
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: "sandbox-run", Title: "sandbox-run", Version: Version},
		&sdk.ServerOptions{Instructions: instructions, Capabilities: &sdk.ServerCapabilities{}})
	s.mcp.AddReceivingMiddleware(dropNulls)
	s.addTools()
	s.addLiveTools()
	s.addPauseTools()
	s.addNetworkTool()
	s.addForkTool()
	s.addSnapshotTools()
	s.addSecretTools()
	return s
}

const instructions = `sandbox-run runs code in a sandbox: fresh Linux namespaces, no network, ` +
	`hard limits on time, memory, processes and output. Use execute_code for a one-off run ` +
	`(list_languages says what is installed). To keep files between runs, create_session, ` +
	`then run_in_session as often as needed (the working directory /work persists), ` +
	`list_session_files and read_session_file to look at what the runs left, and close_session when done. ` +
	`For a machine that stays up (processes that keep running, servers, files written and read while they run), ` +
	`sandbox_create a live sandbox, then sandbox_exec commands in it, sandbox_write_file, sandbox_read_file and ` +
	`sandbox_list_files, and sandbox_kill it when done (it also ends at its timeout). ` +
	`A program that needs a credential (an API token) names the API key's secrets (list_secrets) in execute_code's ` +
	`secrets: it sees placeholders, and the server puts the values in its HTTP requests to the secrets' hosts; ` +
	`secrets are stored by their owner through the HTTP API, never through these tools.`

// MCP returns the SDK server, to run on any transport.
func (s *Server) MCP() *sdk.Server { return s.mcp }

// Run serves one client on t (Stdio for stdin and stdout) until it goes
// away or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.mcp.Run(ctx, t)
}

// Close ends every session and removes its files, waiting for runs of
// them to finish, and every live sandbox (`sandbox-run mcp`: sessions and
// sandboxes last as long as the process).
func (s *Server) Close() {
	s.svc.EndAllSessions()
	if m := s.svc.Live(); m != nil {
		m.Close()
	}
}

// ---------------------------------------------------------------------------
// Tool inputs and outputs. Fields without omitempty are required.

// Limits are a run's limits; zero or absent fields take the defaults.
type Limits struct {
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"wall-clock time limit of the run in seconds (default 30; the server has a maximum)"`
	MemoryMB       int64   `json:"memory_mb,omitempty" jsonschema:"memory limit in MiB (default 256; the server has a maximum)"`
}

// ExecuteInput is the input of execute_code.
type ExecuteInput struct {
	Language string            `json:"language" jsonschema:"the language: python, javascript, go, rust, java, bash, c, cpp, ... (see list_languages)"`
	Code     string            `json:"code" jsonschema:"the program's source code"`
	Version  string            `json:"version,omitempty" jsonschema:"optional toolchain version prefix the installed one must match"`
	Image    string            `json:"image,omitempty" jsonschema:"optional OCI image whose root filesystem the run uses instead of the server's (e.g. python:3.12-slim), with the language's toolchain found in it; only images the server's images.allow permits"`
	Stdin    string            `json:"stdin,omitempty" jsonschema:"text given to the program on standard input"`
	Args     []string          `json:"args,omitempty" jsonschema:"command-line arguments of the program"`
	Files    map[string]string `json:"files,omitempty" jsonschema:"extra files put in the working directory before the run: relative path to text content"`
	Limits   *Limits           `json:"limits,omitempty" jsonschema:"resource limits of the run"`
	Network  *Network          `json:"network,omitempty" jsonschema:"network access for the run (default: none); only what the server's network.allow permits"`
	Secrets  []string          `json:"secrets,omitempty" jsonschema:"names of secrets of your API key (list_secrets lists them) the run uses without seeing them: each is in the environment variable of its name as a placeholder, which the server replaces with the secret's value in the run's HTTP and HTTPS requests to the secret's hosts; needs network.allow with those hosts"`
	// Isolation is wire.ExecuteRequest's.
	Isolation string `json:"isolation,omitempty" jsonschema:"the wall the run is behind: native (the engine's namespaces, cgroups and seccomp) or gvisor (gVisor's user-space kernel as well); default: the API key's minimum, else the server's default"`
}

// Network is a run's network access.
type Network struct {
	Allow []string `json:"allow" jsonschema:"what the run may reach: host names (pypi.org:443, *.pythonhosted.org:443), IP addresses or CIDRs, each with an optional :PORT; host.sandbox.internal:PORT is the server's own loopback"`
}

// RunInSessionInput is the input of run_in_session.
type RunInSessionInput struct {
	SessionID string            `json:"session_id" jsonschema:"the session, from create_session"`
	Code      string            `json:"code" jsonschema:"the program's source code"`
	Language  string            `json:"language,omitempty" jsonschema:"the session's language (default); another one is refused"`
	Stdin     string            `json:"stdin,omitempty" jsonschema:"text given to the program on standard input"`
	Args      []string          `json:"args,omitempty" jsonschema:"command-line arguments of the program"`
	Files     map[string]string `json:"files,omitempty" jsonschema:"files written to the session's working directory before the run: relative path to text content"`
	Limits    *Limits           `json:"limits,omitempty" jsonschema:"resource limits of this run (default: the session's)"`
	Secrets   []string          `json:"secrets,omitempty" jsonschema:"names of secrets of your API key (list_secrets) the run uses without seeing them, as execute_code's; the session needs network access to their hosts; an interpreter session's cells use the secrets the session was created with"`
}

// OutputFile is a file the run created or changed.
type OutputFile struct {
	Content  string `json:"content" jsonschema:"the file's content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"base64 when the content is not UTF-8 text"`
}

// CompileResult is the compile step's outcome.
type CompileResult struct {
	Status     string  `json:"status" jsonschema:"completed; error_compile when the compiler failed (non-zero exit, a signal, or a limit other than time); timeout when it reached the compile time limit; error_setup when its sandbox could not be set up"`
	Stdout     string  `json:"stdout" jsonschema:"the compiler's standard output"`
	Stderr     string  `json:"stderr" jsonschema:"the compiler's standard error (the diagnostics)"`
	ExitCode   int     `json:"exit_code" jsonschema:"the compiler's exit code; -1 when a signal ended it or it never ran"`
	DurationMs float64 `json:"duration_ms" jsonschema:"wall-clock time of the compile in milliseconds"`
	CacheHit   bool    `json:"cache_hit" jsonschema:"true when no compiler ran: an identical successful compile of the same API key (of any key when the server shares its compile cache) was reused"`
}

// RunResult is the output of execute_code and run_in_session.
type RunResult struct {
	ExecutionID     string                `json:"execution_id" jsonschema:"the execution's id (in the server's logs)"`
	Status          string                `json:"status" jsonschema:"completed (exit 0), error_runtime (non-zero exit, signal or a limit other than time), timeout (wall or CPU time), error_compile (the compile step failed or timed out: see compile.status) or error_setup"`
	Stdout          string                `json:"stdout" jsonschema:"the program's standard output"`
	Stderr          string                `json:"stderr" jsonschema:"the program's standard error"`
	StdoutEncoding  string                `json:"stdout_encoding,omitempty" jsonschema:"base64 when stdout is not UTF-8 text"`
	StderrEncoding  string                `json:"stderr_encoding,omitempty" jsonschema:"base64 when stderr is not UTF-8 text"`
	ExitCode        int                   `json:"exit_code" jsonschema:"the program's exit code; -1 when a signal ended it (signal then names it)"`
	Signal          string                `json:"signal,omitempty" jsonschema:"the signal that ended the program, e.g. SIGKILL, if one did (exit_code is then -1)"`
	LimitReason     string                `json:"limit_reason,omitempty" jsonschema:"the limit that ended the run, if one did: wall_time, cpu_time, memory, processes, output, ..."`
	DurationMs      float64               `json:"duration_ms" jsonschema:"wall-clock time of the run in milliseconds"`
	CPUTimeMs       float64               `json:"cpu_time_ms" jsonschema:"CPU time of the run in milliseconds"`
	MemoryUsedMB    float64               `json:"memory_used_mb" jsonschema:"peak memory of the run in MiB"`
	Language        string                `json:"language,omitempty" jsonschema:"the language that ran"`
	Version         string                `json:"version,omitempty" jsonschema:"its toolchain's version"`
	Image           string                `json:"image,omitempty" jsonschema:"the OCI image the run had as its root filesystem, if any"`
	ImageDigest     string                `json:"image_digest,omitempty" jsonschema:"that image's manifest digest (sha256:...)"`
	Result          map[string]string     `json:"result,omitempty" jsonschema:"an interpreter cell's last expression's value, by MIME type (text/plain, text/html, ...)"`
	Display         []map[string]string   `json:"display,omitempty" jsonschema:"what an interpreter cell displayed (figures as image/png in base64), by MIME type"`
	Restarted       bool                  `json:"restarted,omitempty" jsonschema:"the interpreter was started again: the session's state is lost"`
	Network         *wire.NetworkReport   `json:"network,omitempty" jsonschema:"what a run with network access tried: each destination (host, ip, port, protocol, allowed or denied and why, connections, bytes each way) and totals; for a run with secrets, requests lists its HTTP and HTTPS requests as the program sent them (placeholders, never values) and the secrets put in each"`
	StdoutTruncated bool                  `json:"stdout_truncated" jsonschema:"true when stdout was cut at the output limit"`
	StderrTruncated bool                  `json:"stderr_truncated" jsonschema:"true when stderr was cut at the output limit"`
	OutputFiles     map[string]OutputFile `json:"output_files,omitempty" jsonschema:"files the run created or changed in its working directory, by relative path"`
	Compile         *CompileResult        `json:"compile,omitempty" jsonschema:"the compile step, for compiled languages"`
	SessionID       string                `json:"session_id,omitempty" jsonschema:"the session the run belongs to"`
}

// LanguagesInput is the (empty) input of list_languages.
type LanguagesInput struct{}

// Language is one installed language.
type Language struct {
	Name       string   `json:"name" jsonschema:"the name to give as language"`
	Aliases    []string `json:"aliases" jsonschema:"other names accepted"`
	Extensions []string `json:"extensions" jsonschema:"file extensions of its source files"`
	Version    string   `json:"version" jsonschema:"the installed toolchain's version"`
	Compiled   bool     `json:"compiled" jsonschema:"true when runs compile first"`
	Versions   []string `json:"versions,omitempty" jsonschema:"every installed version; give one (or a prefix such as 3.12) as version"`
}

// LanguagesOutput is the output of list_languages.
type LanguagesOutput struct {
	Languages []Language `json:"languages" jsonschema:"the languages installed on this server"`
}

// CreateSessionInput is the input of create_session.
type CreateSessionInput struct {
	Language    string   `json:"language" jsonschema:"the language of the session's runs"`
	Image       string   `json:"image,omitempty" jsonschema:"optional OCI image every run of the session has as its root filesystem (as execute_code's image)"`
	Interpreter bool     `json:"interpreter,omitempty" jsonschema:"a live interpreter (python, javascript): run_in_session runs cells of one process whose variables persist, and returns the last expression's value"`
	Network     *Network `json:"network,omitempty" jsonschema:"network access of the session's runs (default: none); an interpreter session's interpreter has it for its whole life"`
	Secrets     []string `json:"secrets,omitempty" jsonschema:"names of secrets of your API key (list_secrets) the session's runs use without seeing them, as execute_code's (needs network with their hosts); an interpreter session's interpreter has their placeholders for its whole life, and each cell's requests get the values as the cell starts"`
	Limits      *Limits  `json:"limits,omitempty" jsonschema:"default limits of the session's runs"`
}

// SessionOutput describes a session.
type SessionOutput struct {
	SessionID          string  `json:"session_id" jsonschema:"give it to run_in_session and the other session tools"`
	Language           string  `json:"language" jsonschema:"the session's language"`
	IdleTimeoutSeconds float64 `json:"idle_timeout_seconds" jsonschema:"the session ends after this long without a call (0: it lasts as long as the server)"`
	MaxBytes           int64   `json:"max_bytes" jsonschema:"the most the session's files may hold"`
}

// SessionInput names a session.
type SessionInput struct {
	SessionID string `json:"session_id" jsonschema:"the session, from create_session"`
}

// SessionFilesOutput is the output of list_session_files.
type SessionFilesOutput struct {
	SessionID string             `json:"session_id" jsonschema:"the session"`
	Files     []wire.SessionFile `json:"files" jsonschema:"the regular files of the session's working directory, by path relative to it"`
	BytesUsed int64              `json:"bytes_used" jsonschema:"their total size"`
}

// ReadFileInput is the input of read_session_file.
type ReadFileInput struct {
	SessionID string `json:"session_id" jsonschema:"the session, from create_session"`
	Path      string `json:"path" jsonschema:"the file's path relative to the session's working directory"`
}

// ReadFileOutput is the output of read_session_file.
type ReadFileOutput struct {
	SessionID string `json:"session_id" jsonschema:"the session"`
	Path      string `json:"path" jsonschema:"the file's path"`
	Size      int64  `json:"size" jsonschema:"the file's size in bytes"`
	Content   string `json:"content" jsonschema:"the file's content (its first 1 MiB)"`
	Encoding  string `json:"encoding" jsonschema:"utf-8, or base64 when the content is not UTF-8 text"`
	Truncated bool   `json:"truncated" jsonschema:"true when the file is larger than what content holds"`
}

// CloseOutput is the output of close_session.
type CloseOutput struct {
	SessionID string `json:"session_id" jsonschema:"the session"`
	Closed    bool   `json:"closed" jsonschema:"true: the session and its files are gone"`
}

// maxReadBytes is the most read_session_file returns of a file.
const maxReadBytes = 1 << 20

// ---------------------------------------------------------------------------
// Tools.

func (s *Server) addTools() {
	no, yes := false, true
	addTool(s.mcp, &sdk.Tool{Name: "execute_code", Title: "Execute code in a sandbox",
		Description: "Run a program in a fresh sandbox (no network, limited time, memory and processes) and return its " +
			"status, stdout, stderr, exit code, time and memory, the compiler's output if it failed, and files it wrote. " +
			"A program that fails or times out is a normal result (see status), not an error.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, s.executeCode)
	addTool(s.mcp, &sdk.Tool{Name: "list_languages", Title: "List languages",
		Description: "The languages installed on this server, with their versions, aliases and file extensions.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.listLanguages)
	addTool(s.mcp, &sdk.Tool{Name: "create_session", Title: "Create a session",
		Description: "Start a session: runs in it (run_in_session) share a working directory, so files persist between them. " +
			"Close it with close_session when done.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, s.createSession)
	addTool(s.mcp, &sdk.Tool{Name: "run_in_session", Title: "Run code in a session",
		Description: "Run a program in a fresh sandbox whose working directory is the session's: it sees the files earlier " +
			"runs left, and what it writes stays for the next runs. Returns the same result as execute_code. In an interpreter " +
			"session (create_session with interpreter: true) the code is a cell of the session's live interpreter: variables " +
			"persist, result is the last expression's value, and figures it draws come as images after the JSON.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, s.runInSession)
	addTool(s.mcp, &sdk.Tool{Name: "list_session_files", Title: "List a session's files",
		Description: "The files a session's working directory holds, with their sizes.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.listSessionFiles)
	addTool(s.mcp, &sdk.Tool{Name: "read_session_file", Title: "Read a session's file",
		Description: "The content of one file of a session's working directory (at most 1 MiB; base64 when not UTF-8 text).",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.readSessionFile)
	addTool(s.mcp, &sdk.Tool{Name: "close_session", Title: "Close a session",
		Description: "End a session and delete its files.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}}, s.closeSession)
}

func (s *Server) executeCode(ctx context.Context, req *sdk.CallToolRequest, in ExecuteInput) (*sdk.CallToolResult, RunResult, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	s.sweep()
	res, err := s.run(ctx, in, "", s.tenantOf(req))
	return nil, res, err
}

func (s *Server) runInSession(ctx context.Context, req *sdk.CallToolRequest, in RunInSessionInput) (*sdk.CallToolResult, RunResult, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	s.sweep()
	tenant := s.tenantOf(req)
	sess, ok := s.svc.Sessions().Get(in.SessionID, tenant)
	if !ok {
		return nil, RunResult{}, unknownSession(in.SessionID)
	}
	if in.Language == "" {
		in.Language = sess.Language
	}
	// The session's default limits fill what in leaves out (UseSession).
	res, err := s.run(ctx, ExecuteInput{Language: in.Language, Code: in.Code, Stdin: in.Stdin, Args: in.Args,
		Files: in.Files, Limits: in.Limits, Secrets: in.Secrets}, sess.ID, tenant)
	if err != nil {
		return nil, res, err
	}
	return withImages(res), res, nil
}

// withImages gives an interpreter cell's images (a figure it displayed, an
// image as its last value) as MCP image content after the result's JSON
// text, so that a client shows them (or hands them to its model) as
// pictures; nil when the result has none (the SDK then gives the JSON
// alone, as for every other result).
func withImages(res RunResult) *sdk.CallToolResult {
	var images []sdk.Content
	for _, bundle := range append([]map[string]string{res.Result}, res.Display...) {
		for _, mime := range []string{"image/png", "image/jpeg", "image/gif", "image/webp"} {
			if b64, ok := bundle[mime]; ok {
				if data, err := base64.StdEncoding.DecodeString(b64); err == nil {
					images = append(images, &sdk.ImageContent{Data: data, MIMEType: mime})
				}
				break
			}
		}
	}
	if len(images) == 0 {
		return nil
	}
	text, err := json.Marshal(res)
	if err != nil {
		return nil
	}
	return &sdk.CallToolResult{Content: append([]sdk.Content{&sdk.TextContent{Text: string(text)}}, images...)}
}

func unknownSession(id string) error {
	return fmt.Errorf("unknown session %q: create one with create_session (sessions end with close_session, when idle too long, or with the server)", id)
}

// tenantOf is whose compile cache and automatic timeouts a call uses: the
// id of its API key (as over REST), "" over stdio or without keys.
func (s *Server) tenantOf(req *sdk.CallToolRequest) string {
	owner := ownerOf(req)
	if owner == "" {
		return ""
	}
	for _, k := range s.cfg.Keys {
		if k.SHA256 == owner {
			return k.ID
		}
	}
	return owner
}

// run checks in as POST /api/sandbox/execute would, runs it and converts
// the result.
func (s *Server) run(ctx context.Context, in ExecuteInput, sessionID, tenant string) (RunResult, error) {
	leave, err := s.svc.Admit(runner.CallerOf(ctx), 1, true)
	if err != nil {
		return RunResult{}, err
	}
	defer leave()
	areq, err := s.request(ctx, in, sessionID, tenant)
	if err != nil {
		return RunResult{}, err
	}
	res, err := s.svc.Run(ctx, runner.Run{Request: areq, Tenant: tenant, Via: "mcp", Session: sessionID})
	if err != nil {
		return RunResult{}, err
	}
	if res.Status == wire.StatusSetupError {
		return RunResult{}, fmt.Errorf("the sandbox could not be set up (execution %s): %s", res.ExecutionID, res.Error)
	}
	out := runResult(res)
	out.SessionID = sessionID
	return out, nil
}

// request builds the executor's request from in after the checks of the
// HTTP API: the same bounds and the server's maximums (runner.Check).
func (s *Server) request(ctx context.Context, in ExecuteInput, sessionID, tenant string) (*wire.ExecuteRequest, error) {
	areq := wire.ExecuteRequest{Language: in.Language, Code: in.Code, Version: in.Version, Image: in.Image, InputData: in.Stdin,
		Args: in.Args, SessionID: sessionID, Isolation: in.Isolation, Secrets: in.Secrets}
	if in.Network != nil {
		areq.Network = &wire.NetworkRequest{Allow: in.Network.Allow}
	}
	if in.Limits != nil {
		areq.TimeoutSeconds, areq.MaxMemoryMB = in.Limits.TimeoutSeconds, in.Limits.MemoryMB
	}
	for name, content := range in.Files {
		if areq.Files == nil {
			areq.Files = map[string]wire.FileData{}
		}
		areq.Files[name] = wire.FileData(content)
	}
	// The checks of POST /api/sandbox/execute (the run service's one
	// sequence), in the tools' field names.
	if err := s.svc.Prepare(ctx, &areq, tenant); err != nil {
		if runner.KindOf(err) == runner.Invalid {
			return nil, errors.New(inputNames.Replace(err.Error()))
		}
		return nil, err
	}
	return &areq, nil
}

// inputNames says the HTTP API's field names in the tools' terms.
var inputNames = strings.NewReplacer("max_memory_mb", "limits.memory_mb", "timeout_seconds", "limits.timeout_seconds",
	"input_data", "stdin")

func runResult(res *wire.Result) RunResult {
	out := RunResult{ExecutionID: res.ExecutionID, Status: string(res.Status), Stdout: res.Stdout, Stderr: res.Stderr,
		StdoutEncoding: res.StdoutEncoding, StderrEncoding: res.StderrEncoding, ExitCode: res.ExitCode,
		Signal: res.Signal, LimitReason: res.LimitReason, DurationMs: res.DurationMs, CPUTimeMs: res.CPUTimeMs,
		MemoryUsedMB: res.MemoryUsedMB, Language: res.Language, Version: res.Version, Image: res.Image, ImageDigest: res.ImageDigest,
		Result: res.Value, Display: res.Display, Restarted: res.Restarted, Network: res.Network,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
	for name, data := range res.OutputFiles {
		if out.OutputFiles == nil {
			out.OutputFiles = map[string]OutputFile{}
		}
		content, encoding := textOrBase64(data)
		if encoding == "utf-8" {
			encoding = ""
		}
		out.OutputFiles[name] = OutputFile{Content: content, Encoding: encoding}
	}
	if c := res.Compile; c != nil {
		out.Compile = &CompileResult{Status: string(c.Status), Stdout: c.Stdout, Stderr: c.Stderr,
			ExitCode: c.ExitCode, DurationMs: c.DurationMs, CacheHit: c.CacheHit}
	}
	return out
}

func textOrBase64(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

func (s *Server) listLanguages(ctx context.Context, req *sdk.CallToolRequest, _ LanguagesInput) (*sdk.CallToolResult, LanguagesOutput, error) {
	out := LanguagesOutput{Languages: []Language{}}
	for _, l := range s.svc.Languages() {
		if !l.Available {
			continue
		}
		info := Language{Name: l.Name, Aliases: l.Aliases, Extensions: l.Extensions, Version: l.DefaultVersion(), Compiled: l.Compiled}
		for _, v := range l.Versions {
			info.Versions = append(info.Versions, v.Version)
		}
		out.Languages = append(out.Languages, info)
	}
	return nil, out, nil
}

func (s *Server) createSession(ctx context.Context, req *sdk.CallToolRequest, in CreateSessionInput) (*sdk.CallToolResult, SessionOutput, error) {
	s.sweep()
	sreq := wire.SessionRequest{Language: in.Language, Image: in.Image, Interpreter: in.Interpreter, Secrets: in.Secrets}
	if in.Network != nil {
		sreq.Network = &wire.NetworkRequest{Allow: in.Network.Allow}
	}
	if in.Limits != nil {
		sreq.TimeoutSeconds, sreq.MaxMemoryMB = in.Limits.TimeoutSeconds, in.Limits.MemoryMB
	}
	idle := s.cfg.SessionIdleSeconds
	if s.stdio {
		// As long as the process, within the longest a session may live.
		sreq.TTLSeconds, idle = s.cfg.SessionMaxTTLSeconds, 0
	}
	sess, err := s.svc.CreateSession(s.tenantOf(req), sreq)
	if err != nil {
		return nil, SessionOutput{}, errors.New(inputNames.Replace(err.Error()))
	}
	return nil, SessionOutput{SessionID: sess.ID, Language: sess.Language, IdleTimeoutSeconds: idle, MaxBytes: s.cfg.SessionMaxBytes}, nil
}

// ownSession is the caller's session id, with the executor's session side.
func (s *Server) ownSession(req *sdk.CallToolRequest, id string) (runner.SessionExecutor, error) {
	x := s.svc.SessionFiles()
	if _, ok := s.svc.Sessions().Get(id, s.tenantOf(req)); !ok || x == nil {
		return nil, unknownSession(id)
	}
	return x, nil
}

func (s *Server) listSessionFiles(ctx context.Context, req *sdk.CallToolRequest, in SessionInput) (*sdk.CallToolResult, SessionFilesOutput, error) {
	s.sweep()
	x, err := s.ownSession(req, in.SessionID)
	if err != nil {
		return nil, SessionFilesOutput{}, err
	}
	files, total, err := x.SessionFiles(in.SessionID)
	if err != nil {
		return nil, SessionFilesOutput{}, fmt.Errorf("listing the files of session %s: %v", in.SessionID, err)
	}
	if files == nil {
		files = []wire.SessionFile{}
	}
	return nil, SessionFilesOutput{SessionID: in.SessionID, Files: files, BytesUsed: total}, nil
}

func (s *Server) readSessionFile(ctx context.Context, req *sdk.CallToolRequest, in ReadFileInput) (*sdk.CallToolResult, ReadFileOutput, error) {
	s.sweep()
	x, err := s.ownSession(req, in.SessionID)
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	f, err := x.OpenSessionFile(in.SessionID, in.Path)
	if err != nil {
		var inv *wire.InvalidError
		if errors.As(err, &inv) {
			return nil, ReadFileOutput{}, errors.New(inv.Msg)
		}
		return nil, ReadFileOutput{}, fmt.Errorf("session %s has no file %q (list_session_files lists them)", in.SessionID, in.Path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes))
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	content, encoding := textOrBase64(data)
	return nil, ReadFileOutput{SessionID: in.SessionID, Path: in.Path, Size: st.Size(), Content: content,
		Encoding: encoding, Truncated: st.Size() > int64(len(data))}, nil
}

func (s *Server) closeSession(ctx context.Context, req *sdk.CallToolRequest, in SessionInput) (*sdk.CallToolResult, CloseOutput, error) {
	s.sweep()
	// Waits for a run of the session to finish.
	found, err := s.svc.EndSession(in.SessionID, s.tenantOf(req))
	switch {
	case !found:
		return nil, CloseOutput{}, unknownSession(in.SessionID)
	case err != nil:
		return nil, CloseOutput{}, err
	}
	return nil, CloseOutput{SessionID: in.SessionID, Closed: true}, nil
}

// sweep ends the sessions idle past their time (over HTTP the API
// server's janitor does it too).
func (s *Server) sweep() { s.svc.SweepSessions(time.Now()) }
