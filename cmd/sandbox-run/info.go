package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// languageInfo is one language of `sandbox-run languages`: the top-level
// fields describe its default version (what a run without --version gets),
// Versions every entry of that name.
type languageInfo struct {
	Name      string        `json:"name"`
	Aliases   []string      `json:"aliases,omitempty"`
	Version   string        `json:"version,omitempty"`
	Compiled  bool          `json:"compiled"`
	Available bool          `json:"available"`
	Reason    string        `json:"reason,omitempty"`
	Toolchain string        `json:"toolchain,omitempty"`
	Versions  []versionInfo `json:"versions"`
}

// versionInfo is one entry (one toolchain) of a language.
type versionInfo struct {
	Version   string `json:"version,omitempty"`
	Available bool   `json:"available"`
	Default   bool   `json:"default"`
	Compiled  bool   `json:"compiled"`
	Reason    string `json:"reason,omitempty"`
	Toolchain string `json:"toolchain,omitempty"`
}

func listLanguages(reg *executor.Registry) []languageInfo {
	langs := reg.Languages()
	var wg sync.WaitGroup
	for _, l := range langs {
		wg.Add(1)
		go func() { // version checks start toolchains; do them side by side
			defer wg.Done()
			reg.Toolchain(l)
		}()
	}
	wg.Wait()
	var out []languageInfo
	for _, name := range reg.LanguageNames() {
		entries := reg.Entries(name)
		def, _ := reg.Lookup(name)
		info := languageInfo{Name: name, Versions: []versionInfo{}}
		for _, l := range entries {
			tc := reg.Toolchain(l)
			v := versionInfo{Version: tc.Version, Available: tc.Err == nil, Default: l == def, Compiled: l.Compiled(), Toolchain: tc.Bin}
			if tc.Err != nil {
				v.Reason = tc.Err.Error()
			}
			info.Versions = append(info.Versions, v)
			if l == def {
				info.Aliases, info.Compiled, info.Available = l.Aliases, l.Compiled(), v.Available
				info.Version, info.Reason, info.Toolchain = v.Version, v.Reason, v.Toolchain
			}
		}
		out = append(out, info)
	}
	return out
}

func cmdLanguages(args []string) int {
	common, ok, code := parseCommonOnly("languages", args)
	if !ok {
		return code
	}
	reg, err := executor.NewRegistry(common.cfg.Languages)
	if err != nil {
		return fatalf(exitUsage, "%v", err)
	}
	infos := listLanguages(reg)
	if common.format == "json" {
		printJSON(infos)
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LANGUAGE\tVERSION\tKIND\tAVAILABLE\tALIASES")
	for _, l := range infos {
		for _, v := range l.Versions {
			kind := "interpreted"
			if v.Compiled {
				kind = "compiled"
			}
			avail := "yes"
			if !v.Available {
				avail = "no: " + v.Reason
			}
			version := v.Version
			if v.Default && len(l.Versions) > 1 {
				version += " (default)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Name, version, kind, avail, strings.Join(l.Aliases, ", "))
		}
	}
	tw.Flush()
	return 0
}

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Required checks decide the verdict; the others are information.
	Required bool `json:"required"`
}

func cmdDoctor(args []string) int {
	common, parsed, code := parseCommonOnly("doctor", args)
	if !parsed {
		return code
	}
	checks := hostChecks()
	// The trial run's sandbox, cgroups and mounts are gone when doctor ends.
	engine, err := common.oneShotEngine()
	var setupErr *sandbox.SetupError
	if errors.As(err, &setupErr) && strings.HasPrefix(setupErr.Step, "cgroup") {
		// The message names what is missing and how to get it.
		checks = append(checks, check{Name: "cgroups", Detail: err.Error(), Required: true})
	} else if err != nil {
		checks = append(checks, check{Name: "sandbox engine", Detail: err.Error(), Required: true})
	} else {
		defer engine.Close()
		cg := engine.Cgroups()
		detail := fmt.Sprintf("cgroup v%d, controllers %s", cg.Version, strings.Join(cg.Controllers, ", "))
		for c, dir := range cg.Parents {
			if cg.Version == 2 || c == "memory" {
				detail += ", runs under " + dir
			}
		}
		checks = append(checks, check{Name: "cgroups", OK: true, Detail: detail, Required: true})
		checks = append(checks, trialRun(engine))
	}
	if reg, err := executor.NewRegistry(common.cfg.Languages); err != nil {
		checks = append(checks, check{Name: "languages", Detail: err.Error(), Required: true})
	} else {
		var have, missing []string
		for _, l := range listLanguages(reg) {
			if l.Available {
				have = append(have, l.Name+" "+l.Version)
			} else {
				missing = append(missing, l.Name)
			}
		}
		detail := "found: " + strings.Join(have, ", ")
		if len(missing) > 0 {
			detail += "; not installed: " + strings.Join(missing, ", ")
		}
		checks = append(checks, check{Name: "toolchains", OK: len(have) > 0, Detail: detail})
	}
	ok := true
	for _, c := range checks {
		if c.Required && !c.OK {
			ok = false
		}
	}
	if common.format == "json" {
		json.NewEncoder(os.Stdout).Encode(map[string]any{"ok": ok, "checks": checks})
	} else {
		for _, c := range checks {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
				if !c.Required {
					mark = "warn"
				}
			}
			fmt.Printf("[%s] %-16s %s\n", mark, c.Name, c.Detail)
		}
		if ok {
			fmt.Println("verdict: this host can run sandboxes")
		} else {
			fmt.Println("verdict: this host cannot run sandboxes; fix the FAIL lines above")
		}
	}
	if !ok {
		return 1
	}
	return 0
}

// trialRun proves the whole chain by running /bin/true in a sandbox.
func trialRun(e *sandbox.Engine) check {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := e.Run(ctx, &sandbox.Spec{Args: []string{"/bin/true"}, Mounts: sandbox.SystemMounts, Env: []string{"PATH=/usr/bin:/bin"}})
	c := check{Name: "trial run", Required: true}
	switch {
	case err != nil:
		c.Detail = err.Error()
	case res.ExitCode != 0:
		c.Detail = fmt.Sprintf("/bin/true exited %d %s", res.ExitCode, res.Signal)
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("/bin/true ran sandboxed in %v", time.Since(start).Round(10*time.Microsecond))
	}
	return c
}
