package mcp

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// LiveResumeInput is the input of sandbox_resume.
type LiveResumeInput struct {
	SandboxID      string  `json:"sandbox_id" jsonschema:"the sandbox, from sandbox_create (or sandbox_list)"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"its life from now on, in seconds (default: what was left of it when it was paused)"`
}

func (s *Server) addPauseTools() {
	no := false
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_pause", Title: "Pause a live sandbox",
		Description: "Pause a live sandbox: its processes are frozen where they are (their memory, files and connections kept, " +
			"no CPU used) and its timeout stops, until sandbox_resume or any other sandbox_ call on it, which resumes it first. " +
			"Pausing a sandbox that is paused already leaves it so.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}}, s.livePause)
	addTool(s.mcp, &sdk.Tool{Name: "sandbox_resume", Title: "Resume a paused live sandbox",
		Description: "Resume a paused live sandbox: its processes go on where they were, and its timeout starts again " +
			"(timeout_seconds from now, or what was left of it). A sandbox that runs is left running.",
		Annotations: &sdk.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}}, s.liveResume)
}

func (s *Server) livePause(ctx context.Context, req *sdk.CallToolRequest, in LiveIDInput) (*sdk.CallToolResult, LiveSandbox, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	sb, err := s.liveSandbox(ctx, in.SandboxID)
	if err != nil {
		return nil, LiveSandbox{}, err
	}
	if err := s.svc.PauseLive(ctx, runner.CallerOf(ctx), sb.ID); err != nil && runner.KindOf(err) != runner.Exists {
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
