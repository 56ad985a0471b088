package runner

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Check checks a request against the configuration's bounds (files,
// args, environment) and maximums (limits, response budget) and its own
// consistency: an *Error of kind Invalid says what is wrong, in the API's
// field names.
func Check(req *wire.ExecuteRequest, cfg *config.Config) error {
	switch {
	case strings.TrimSpace(req.Language) == "":
		return invalid("language is required")
	case req.Code == "" && req.CodeFileID == "":
		return invalid("code is required")
	case len(req.Files) > cfg.MaxFiles:
		return invalid("too many files: %d (at most %d)", len(req.Files), cfg.MaxFiles)
	case len(req.Args) > cfg.MaxArgs:
		return invalid("too many args: %d (at most %d)", len(req.Args), cfg.MaxArgs)
	case len(req.Env) > cfg.MaxEnv:
		return invalid("too many env entries: %d (at most %d)", len(req.Env), cfg.MaxEnv)
	}
	if req.Image != "" {
		if err := checkImage(req.Image, cfg); err != nil {
			return err
		}
	}
	if err := checkNetwork(req, cfg); err != nil {
		return err
	}
	for name := range req.Files {
		if _, err := sandbox.ValidatePath(name); err != nil {
			return invalid("invalid file name: %v", err)
		}
	}
	for name := range req.FileIDs {
		if _, err := sandbox.ValidatePath(name); err != nil {
			return invalid("invalid file name: %v", err)
		}
	}
	switch req.InputDataEncoding {
	case "", "utf-8":
	case "base64":
		if _, err := base64.StdEncoding.DecodeString(req.InputData); err != nil {
			return invalid("input_data is not valid base64: %v", err)
		}
	default:
		return invalid("input_data_encoding %q: use utf-8 or base64", req.InputDataEncoding)
	}
	if err := req.Limits.Within(cfg.Maximums.Limits()); err != nil {
		return invalid("%v", err)
	}
	switch r := req.MaxResponseBytes; {
	case r < 0:
		return invalid("max_response_bytes must not be negative")
	case cfg.MaxResponseBytes > 0 && r > cfg.MaxResponseBytes:
		return invalid("max_response_bytes %d is above the maximum of %d bytes", r, cfg.MaxResponseBytes)
	}
	return nil
}

// checkImage checks an image a run or a live sandbox names: a valid
// reference that the server's images.allow allows.
func checkImage(ref string, cfg *config.Config) error {
	if _, err := images.ParseRef(ref); err != nil {
		return invalid("image: %v", err)
	}
	if !images.NewPolicy(cfg.Images.Allow).Allows(ref) {
		if len(cfg.Images.Allow) == 0 {
			return invalid("image %.200q: this server runs no image a request names (its images.allow is empty)", ref)
		}
		return invalid("image %.200q is not allowed here: it matches none of the server's images.allow patterns", ref)
	}
	return nil
}

// checkNetwork checks a request's network access: a valid allow-list,
// each entry within the server's network.allow.
func checkNetwork(req *wire.ExecuteRequest, cfg *config.Config) error {
	if req.Network == nil {
		return nil
	}
	if err := checkAllow(req.Network.Allow, cfg); err != nil {
		return err
	}
	if err := checkBudgets(req.Network); err != nil {
		return err
	}
	if len(req.TestCases) > 0 {
		return invalid("network is not available with test_cases: give each case its own request")
	}
	return nil
}

// checkBudgets checks a network request's byte budgets: each for one of
// its entries, as written, and a positive number of bytes.
func checkBudgets(n *wire.NetworkRequest) error {
	for entry, b := range n.Budgets {
		switch {
		case !slices.Contains(n.Allow, entry):
			return invalid("network.budgets: %q is none of network.allow's entries (name one as it is written there)", entry)
		case b <= 0:
			return invalid("network.budgets: %q: give a positive number of bytes", entry)
		}
	}
	return nil
}

// checkAllow checks a network allow-list: valid, not empty, and each entry
// within the server's network.allow.
func checkAllow(allow []string, cfg *config.Config) error {
	p, err := netpolicy.ParsePolicy(allow)
	switch {
	case err != nil:
		return invalid("network.allow: %v", err)
	case p.Empty():
		return invalid("network.allow is empty: list what may be reached (leave network out for none)")
	}
	max, _ := netpolicy.ParsePolicy(cfg.Network.Allow) // checked by config.Validate
	if max.Empty() {
		return invalid("this server gives no network (its network.allow is empty)")
	}
	if err := p.Within(max); err != nil {
		return invalid("network.allow: %v", err)
	}
	return nil
}

func invalid(format string, a ...any) error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, a...)}
}

// CheckLanguage refuses a language or version that is not installed (in
// an image, one the backend does not know: its toolchain is looked for in
// the image when the run starts).
func (s *Service) CheckLanguage(req *wire.ExecuteRequest) error {
	if req.Image != "" {
		if _, ok := s.x.Lookup(req.Language); !ok {
			_, _, err := s.x.Resolve(req.Language, "") // says what is known
			return err
		}
		return nil
	}
	_, _, err := s.x.Resolve(req.Language, req.Version)
	return err
}

// Validate makes the checks the backend would make only when the run
// starts (test cases, environment, file layout), so that an async job is
// never accepted and then fails for them. req must have passed Check and
// CheckLanguage, and its stored files and session be resolved.
func (s *Service) Validate(req *wire.ExecuteRequest) error {
	return s.x.Validate(&Run{Request: req})
}

// Prepare is the door's second half for a decoded request of owner's (an
// API key's id, or ""), the one sequence every transport goes through:
// the configuration's bounds and maximums (Check), its callback_url
// (CheckCallback), its session (its defaults filled, UseSession), its
// language (CheckLanguage), and what the backend would refuse only when
// the run starts (Validate). Any *Error it returns is Invalid or Full, in
// the API's field names.
func (s *Service) Prepare(ctx context.Context, req *wire.ExecuteRequest, owner string) error {
	if err := Check(req, &s.cfg.App); err != nil {
		return err
	}
	if err := s.CheckCallback(ctx, req.CallbackURL); err != nil {
		return err
	}
	if err := s.UseSession(req, owner); err != nil {
		return err
	}
	if err := s.ResolveIsolation(req, CallerOf(ctx).Key); err != nil {
		return err
	}
	if err := s.checkSecrets(req, owner); err != nil {
		return err
	}
	return s.CheckRun(req)
}

// ResolveIsolation settles req's isolation: its own, else key's
// isolation_min, else the server's isolation.default; a name that is no
// backend, or one weaker than key's isolation_min, is refused (Invalid).
func (s *Service) ResolveIsolation(req *wire.ExecuteRequest, key *Key) error {
	min := ""
	if key != nil {
		min = key.IsolationMin
	}
	if req.Isolation == "" {
		req.Isolation = cmp.Or(min, s.cfg.App.Isolation.Default, config.IsolationNative)
	}
	switch rank := config.IsolationRank(req.Isolation); {
	case rank < 0:
		return invalid("isolation %q: use %q or %q", req.Isolation, config.IsolationNative, config.IsolationGVisor)
	case rank < config.IsolationRank(min):
		return &Error{Kind: Forbidden, Msg: fmt.Sprintf("isolation %q is below this key's isolation_min %q: ask for %q (or name none)", req.Isolation, min, min)}
	}
	return nil
}

// CheckRun is Prepare without the session step, for a request whose
// session was resolved where it came from (a cluster's worker): its
// language and what the backend would refuse when the run starts.
func (s *Service) CheckRun(req *wire.ExecuteRequest) error {
	if err := s.CheckLanguage(req); err != nil {
		return err
	}
	return s.Validate(req)
}

// ErrCallbackURL is wrapped by the Error of a callback_url the policy
// refuses, for a transport that names the field its own way.
var ErrCallbackURL = errors.New("callback_url refused")

// CheckCallback refuses (Invalid, wrapping ErrCallbackURL) a callback_url
// that callbacks may not reach: the one address policy (pkg/netpolicy,
// through pkg/webhook) with the server's callback_allow. "" passes.
func (s *Service) CheckCallback(ctx context.Context, url string) error {
	if url == "" {
		return nil
	}
	if err := s.hooks.CheckURL(ctx, url); err != nil {
		return &Error{Kind: Invalid, Msg: err.Error(), Err: fmt.Errorf("%w: %w", ErrCallbackURL, err)}
	}
	return nil
}
