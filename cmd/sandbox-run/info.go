package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

func cmdLanguages(args []string) int {
	common, ok, code := parseCommonOnly("languages", args)
	if !ok {
		return code
	}
	reg, err := executor.NewRegistry(common.cfg.Languages)
	if err != nil {
		return fatalf(exitUsage, "%v", err)
	}
	infos := reg.Describe()
	if common.format == "json" {
		cli.PrintJSON(infos)
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

func cmdDoctor(args []string) int {
	common, parsed, code := parseCommonOnly("doctor", args)
	if !parsed {
		return code
	}
	// The trial run's sandbox, cgroups and mounts are gone when it returns.
	checks := sandbox.Diagnose(common.oneShot())
	if reg, err := executor.NewRegistry(common.cfg.Languages); err != nil {
		checks = append(checks, sandbox.Check{Name: "languages", Detail: err.Error(), Required: true})
	} else {
		var have, missing []string
		for _, l := range reg.Describe() {
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
		checks = append(checks, sandbox.Check{Name: "toolchains", OK: len(have) > 0, Detail: detail})
	}
	checks = append(checks, local.ToolchainCacheChecks(common.cfg)...)
	checks = append(checks, local.GVisorCheck(common.cfg))
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
