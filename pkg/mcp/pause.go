package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// LiveResumeInput is the input of sandbox_resume.
type LiveResumeInput struct {
	SandboxID      string  `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create (or sandbox_list)"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"its life from now on, in seconds (default: what was left of it when it was paused)"`
}

// LivePauseInput is the input of sandbox_pause.
type LivePauseInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create (or sandbox_list)"`
	Evict     bool   `json:"evict,omitempty" jsonschema:"also write it to disk and give its memory back: under gVisor its processes come back where they were, otherwise only its files do (its processes end)"`
}

func (s *Server) addPauseTools() {
	no := false
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_pause", Title: "Pause a live sandbox",
		Description: "Pause a live sandbox: its processes are frozen where they are (their memory, files and connections kept, " +
			"no CPU used) and its timeout stops, until sandbox_resume or any other sandbox_ call on it, which resumes it first. " +
			"Pausing a sandbox that is paused already leaves it so. With evict it is also written to disk, its memory given back.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}}, s.livePause)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_resume", Title: "Resume a paused live sandbox",
		Description: "Resume a paused live sandbox: its processes go on where they were, and its timeout starts again " +
			"(timeout_seconds from now, or what was left of it). A sandbox that runs is left running.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}}, s.liveResume)
}

func (s *Server) livePause(ctx context.Context, req *sdk.CallToolRequest, in LivePauseInput) (*sdk.CallToolResult, LiveSandbox, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	pause := s.svc.PauseLive
	if in.Evict {
		pause = s.svc.EvictLive
	}
	if err := pause(ctx, runner.CallerOf(ctx), sb.ID); err != nil && runner.KindOf(err) != runner.Exists {
		return nil, LiveSandbox{}, err
	}
	return nil, s.liveInfo(sb), nil
}

func (s *Server) liveResume(ctx context.Context, req *sdk.CallToolRequest, in LiveResumeInput) (*sdk.CallToolResult, LiveSandbox, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	d, err := liveSeconds("timeout_seconds", in.TimeoutSeconds)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	if _, err := s.svc.ResumeLive(runner.CallerOf(ctx), sb.ID, d); err != nil {
		return nil, LiveSandbox{}, err
	}
	return nil, s.liveInfo(sb), nil
}

// LiveNetworkInput is the input of sandbox_set_network.
type LiveNetworkInput struct {
	SandboxID string           `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create (or sandbox_list); it must have been created with network_allow"`
	Allow     []string         `json:"allow" jsonschema:"what its network may reach from now on: host names (*.example.com for subdomains), IP addresses or CIDRs, each with an optional :PORT, within what the server allows; [] for nothing at all"`
	Budgets   map[string]int64 `json:"budgets,omitempty" jsonschema:"bytes (both ways, over all its connections) the sandbox may move with what one entry allows, by the entry as written in allow: {\"*.pythonhosted.org:443\": 200000000}; past one, its connections are reset and new ones refused (an entry that had one keeps what it moved)"`
}

func (s *Server) addNetworkTool() {
	no, yes := false, true
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_set_network", Title: "Change what a live sandbox's network reaches",
		Description: "Change what a live sandbox's network may reach, at once and while it runs: allow replaces the list " +
			"sandbox_create's network_allow gave (within what the server allows), and an empty allow cuts it off from everything. " +
			"Its open connections the new list leaves out are reset. A sandbox created without network_allow has no network " +
			"and cannot be given one (create it with network_allow). Returns the sandbox, with its network now.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}}, s.liveSetNetwork)
}

func (s *Server) liveSetNetwork(ctx context.Context, req *sdk.CallToolRequest, in LiveNetworkInput) (*sdk.CallToolResult, LiveSandbox, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	allow := append([]string{}, in.Allow...) // none: it reaches nothing
	if err := s.svc.SetLiveNetwork(runner.CallerOf(ctx), sb.ID, wire.NetworkRequest{Allow: allow, Budgets: in.Budgets}); err != nil {
		if runner.KindOf(err) == runner.NotFound {
			return nil, LiveSandbox{}, noSuchSandbox(in.SandboxID)
		}
		return nil, LiveSandbox{}, errors.New(strings.TrimPrefix(err.Error(), "live: invalid request: "))
	}
	return nil, s.liveInfo(sb), nil
}

// LiveForkInput is the input of sandbox_fork.
type LiveForkInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox to fork, from sandbox_create (or sandbox_list)"`
	Count     int    `json:"count,omitempty" jsonschema:"how many sandboxes to make, 1 to 100 (default 1)"`
}

// LiveForkOutput is the output of sandbox_fork.
type LiveForkOutput struct {
	Sandboxes []LiveSandbox `json:"sandboxes" jsonschema:"the new sandboxes, each with the files the forked one had: give their ids as sandbox_id"`
	Errors    []string      `json:"errors,omitempty" jsonschema:"why some could not be made, if any"`
	Memory    bool          `json:"memory" jsonschema:"true: they have its memory and running processes too (a sandbox under gvisor); false: its files only (start what you need again)"`
}

func (s *Server) addForkTool() {
	no := false
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_fork", Title: "Fork a live sandbox",
		Description: "Make copies of a live sandbox to try different things from one state: each new sandbox has its files " +
			"(its home and /tmp) as they are now, the same languages, network and environment, and is independent from then " +
			"on (its own sandbox_id, timeout and files). Under gvisor isolation its running processes and their memory are " +
			"copied too (memory: true); under native isolation they are not.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, s.liveFork)
}

func (s *Server) liveFork(ctx context.Context, req *sdk.CallToolRequest, in LiveForkInput) (*sdk.CallToolResult, LiveForkOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveForkOutput{}, err
	}
	n := in.Count
	if n == 0 {
		n = 1
	}
	if n < 1 || n > 100 {
		return nil, LiveForkOutput{}, fmt.Errorf("count: %d; give 1 to 100", in.Count)
	}
	kids, errs, err := s.svc.ForkLive(ctx, runner.CallerOf(ctx), sb.ID, n, 0)
	if err != nil {
		return nil, LiveForkOutput{}, err
	}
	out := LiveForkOutput{Sandboxes: []LiveSandbox{}}
	for i, k := range kids {
		if errs[i] != nil {
			out.Errors = append(out.Errors, errs[i].Error())
			continue
		}
		out.Sandboxes = append(out.Sandboxes, s.liveInfo(k))
		out.Memory = out.Memory || k.ForkedMemory
	}
	return nil, out, nil
}

// LiveSnapshotInput is the input of sandbox_snapshot.
type LiveSnapshotInput struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox to keep, from sandbox_create (or sandbox_list)"`
	Name      string `json:"name,omitempty" jsonschema:"a name of your own for the snapshot (its id is always one)"`
}

// LiveSnapshot describes a snapshot.
type LiveSnapshot struct {
	ID        string   `json:"id" jsonschema:"the snapshot's id: give it as snapshot to sandbox_create, or to sandbox_delete_snapshot"`
	Names     []string `json:"names" jsonschema:"its id and the name it was given"`
	SandboxID string   `json:"sandbox_id" jsonschema:"the sandbox it was taken of"`
	CreatedAt string   `json:"created_at" jsonschema:"when it was taken (RFC 3339, UTC)"`
	SizeBytes int64    `json:"size_bytes" jsonschema:"what it keeps on the server, in bytes"`
	Memory    bool     `json:"memory" jsonschema:"true: it keeps the sandbox's running processes and memory too (a sandbox under gvisor); false: its files"`
}

// LiveSnapshotsInput is the input of sandbox_list_snapshots.
type LiveSnapshotsInput struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"only the snapshots of this sandbox (default: all of yours)"`
}

// LiveSnapshotsOutput is the output of sandbox_list_snapshots.
type LiveSnapshotsOutput struct {
	Snapshots []LiveSnapshot `json:"snapshots" jsonschema:"your snapshots, oldest first"`
}

// LiveSnapshotIDInput names a snapshot.
type LiveSnapshotIDInput struct {
	SnapshotID string `json:"snapshot_id" jsonschema:"the snapshot, from sandbox_snapshot (or sandbox_list_snapshots)"`
}

// LiveSnapshotDeleteOutput is the output of sandbox_delete_snapshot.
type LiveSnapshotDeleteOutput struct {
	Deleted string `json:"deleted" jsonschema:"the snapshot deleted"`
}

func (s *Server) addSnapshotTools() {
	no, yes := false, true
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_snapshot", Title: "Keep a live sandbox as a snapshot",
		Description: "Keep a live sandbox's state as a snapshot that new sandboxes start from (sandbox_create with snapshot): " +
			"its files (its home and /tmp), and under gvisor isolation its running processes and their memory too. The sandbox " +
			"is frozen while it is copied and goes on after. Your snapshots together are bounded by the server's quota.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no}}, s.liveSnapshot)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_list_snapshots", Title: "List your snapshots",
		Description: "List your snapshots of live sandboxes (of one sandbox, with sandbox_id), oldest first.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}}, s.liveSnapshots)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_delete_snapshot", Title: "Delete a snapshot",
		Description: "Delete one of your snapshots: sandboxes made from it are not touched, new ones cannot start from it.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: false, OpenWorldHint: &no}}, s.liveDeleteSnapshot)
}

func snapshotInfo(sn *live.Snapshot) LiveSnapshot {
	return LiveSnapshot{ID: sn.ID, Names: slices.Clone(sn.Names), SandboxID: sn.SandboxID, CreatedAt: sn.Created.UTC().Format(time.RFC3339),
		SizeBytes: sn.Size, Memory: sn.Memory}
}

func (s *Server) liveSnapshot(ctx context.Context, req *sdk.CallToolRequest, in LiveSnapshotInput) (*sdk.CallToolResult, LiveSnapshot, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveSnapshot{}, err
	}
	sn, err := s.svc.SnapshotLive(ctx, runner.CallerOf(ctx), sb.ID, in.Name)
	if err != nil {
		return nil, LiveSnapshot{}, err
	}
	return nil, snapshotInfo(sn), nil
}

func (s *Server) liveSnapshots(ctx context.Context, req *sdk.CallToolRequest, in LiveSnapshotsInput) (*sdk.CallToolResult, LiveSnapshotsOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	c, err := s.checkedCaller(ctx)
	if err != nil {
		return nil, LiveSnapshotsOutput{}, err
	}
	out := LiveSnapshotsOutput{Snapshots: []LiveSnapshot{}}
	for _, sn := range s.svc.LiveSnapshots(c, in.SandboxID) {
		out.Snapshots = append(out.Snapshots, snapshotInfo(sn))
	}
	return nil, out, nil
}

func (s *Server) liveDeleteSnapshot(ctx context.Context, req *sdk.CallToolRequest, in LiveSnapshotIDInput) (*sdk.CallToolResult, LiveSnapshotDeleteOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	c, err := s.checkedCaller(ctx)
	if err != nil {
		return nil, LiveSnapshotDeleteOutput{}, err
	}
	if err := s.svc.DeleteLiveSnapshot(c, in.SnapshotID); err != nil {
		return nil, LiveSnapshotDeleteOutput{}, err
	}
	return nil, LiveSnapshotDeleteOutput{Deleted: in.SnapshotID}, nil
}

// checkedCaller is the call's caller, on a server with live sandboxes,
// as the service admits it.
func (s *Server) checkedCaller(ctx context.Context) (runner.Caller, error) {
	c, _, err := s.liveCaller(ctx)
	if err == nil {
		err = s.svc.CheckCaller(c)
	}
	return c, err
}
