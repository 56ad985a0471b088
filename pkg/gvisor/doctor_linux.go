package gvisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Diagnose says whether gVisor runs here with cfg: runsc found, its
// version, and a trial run of /bin/true under it on cfg's platform, with
// its time. It is information (not Required): runs that do not ask for
// gVisor need none of it.
func Diagnose(cfg Config) sandbox.Check {
	c := sandbox.Check{Name: "gvisor"}
	g, err := New(cfg)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	defer g.Close()
	out, _ := exec.Command(g.cfg.Runsc, "--version").Output()
	version, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "runsc version "), "\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	res, err := g.Run(ctx, &sandbox.Spec{Args: []string{"/bin/true"}, Mounts: sandbox.SystemMounts, Env: []string{"PATH=/usr/bin:/bin"},
		Limits: sandbox.Limits{WallTime: 30 * time.Second}})
	switch {
	case err != nil:
		c.Detail = fmt.Sprintf("runsc %s at %s, platform %s: a trial run failed: %v", version, g.cfg.Runsc, g.cfg.Platform, err)
	case res.ExitCode != 0:
		c.Detail = fmt.Sprintf("runsc %s at %s, platform %s: a trial run of /bin/true exited %d (%s)", version, g.cfg.Runsc, g.cfg.Platform, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	default:
		c.OK = true
		kvm := "no /dev/kvm"
		if _, err := os.Stat("/dev/kvm"); err == nil {
			kvm = "/dev/kvm is there (isolation.platform: kvm may be tried; nested KVM can hang)"
		}
		c.Detail = fmt.Sprintf("runsc %s at %s, platform %s: a trial run took %v; %s", version, g.cfg.Runsc, g.cfg.Platform,
			time.Since(start).Round(time.Millisecond), kvm)
	}
	return c
}
