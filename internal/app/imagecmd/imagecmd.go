// Package imagecmd is the command `sandbox-run images pull|ls|rm|prune`:
// it manages the OCI images of a data dir's store (pkg/images), the one a
// CLI's `execute --image` and a server on that data dir use.
package imagecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

const imagesUsage = `Usage: sandbox-run images pull REF... | ls | rm REF... | prune [--data-dir DIR] [--output-format text|json]

Manages the OCI images that runs use as their root filesystem
('sandbox-run execute --image REF'), kept under DATA_DIR/images:
  pull   fetches each image from its source (a tag is looked up again) and
         unpacks it, so that the next run starts at once; progress on a terminal
  ls     lists the images by reference: digest, size, when pulled
  rm     forgets references (prune then frees their layers)
  prune  removes the images, layers and unpacked trees no reference needs

REF is what docker takes (python:3.12-slim, ghcr.io/org/img:tag,
name@sha256:..., 127.0.0.1:5000/img for a local registry over plain HTTP),
oci:/DIR[:TAG] (an OCI image layout) or docker-archive:/FILE.tar (docker save).
Registry credentials come from ~/.docker/config.json (or $DOCKER_CONFIG).

Flags:
`

// Run runs the command with args (those after "images"), its messages on
// con, and returns its exit code.
func Run(args []string, con *cli.Console) int {
	fatalf := func(code int, format string, a ...any) int {
		con.Printf("sandbox-run: "+format+"\n", a...)
		return code
	}
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), imagesUsage)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, "data-dir")
	var format string
	fs.StringVar(&format, "output-format", "text", "output format: text or json")
	fs.StringVar(&format, "o", "text", "shorthand for --output-format")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if format != "text" && format != "json" {
		return fatalf(cli.ExitUsage, "--output-format must be text or json, not %q", format)
	}
	if len(words) == 0 {
		con.Message("sandbox-run: images wants pull, ls, rm or prune\n" + cli.UsageHint(fs))
		return cli.ExitUsage
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fatalf(cli.ExitUsage, "config: %v", err)
	}
	asJSON := format == "json"
	cmd, refs := words[0], words[1:]
	for _, ref := range refs {
		if _, err := images.ParseRef(ref); err != nil {
			return fatalf(cli.ExitUsage, "%v", err)
		}
	}
	switch cmd {
	case "pull", "ls", "list", "rm", "remove", "prune":
	default:
		con.Message(fmt.Sprintf("sandbox-run: unknown images command %q: use pull, ls, rm or prune\n", cmd) + cli.UsageHint(fs))
		return cli.ExitUsage
	}
	if (cmd == "pull" || cmd == "rm" || cmd == "remove") && len(refs) == 0 {
		return fatalf(cli.ExitUsage, "images %s wants one or more image references", cmd)
	}
	if (cmd == "ls" || cmd == "list" || cmd == "prune") && len(refs) > 0 {
		return fatalf(cli.ExitUsage, "images %s takes no arguments", cmd)
	}
	store, err := images.Open(filepath.Join(cfg.DataDir, "images"))
	if err != nil {
		return fatalf(1, "image store: %v", err)
	}
	store.Registry = registry.Fetch
	switch cmd {
	case "pull":
		return pull(store, cfg, refs, asJSON, con)
	case "ls", "list":
		return list(store, asJSON, con)
	case "rm", "remove":
		return remove(store, refs, asJSON, con)
	}
	freed, err := store.Prune()
	if err != nil {
		return fatalf(1, "prune: %v", err)
	}
	if asJSON {
		cli.PrintJSON(map[string]int64{"freed_bytes": freed})
	} else {
		fmt.Printf("freed %s\n", cli.Size(freed))
	}
	return 0
}

func pull(store *images.Store, cfg config.Config, refs []string, asJSON bool, con *cli.Console) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, xc := local.EngineConfigs(cfg)
	var pulled []*images.Image
	code := 0
	for _, ref := range refs {
		var progress func(images.Progress)
		if !asJSON && cli.IsTerminal(os.Stderr) {
			last := time.Time{}
			progress = func(p images.Progress) {
				if now := time.Now(); now.Sub(last) > 100*time.Millisecond || p.Done == p.Total {
					last = now
					fmt.Fprintf(os.Stderr, "\rpulling %s: %s of %s   ", ref, cli.Size(p.Done), cli.Size(p.Total))
				}
			}
		}
		start := time.Now()
		img, err := store.Fetch(ctx, ref, xc.ImageCaps, xc.UnpackLimits, progress)
		if progress != nil {
			fmt.Fprint(os.Stderr, "\r\033[K")
		}
		if err != nil {
			con.Printf("sandbox-run: %v\n", err)
			code = 1
			if errors.Is(err, images.ErrUnknown) {
				code = cli.ExitUsage
			}
			continue
		}
		pulled = append(pulled, img)
		if !asJSON {
			fmt.Printf("%s %s (%s, %d layers) in %v\n", img.Ref, img.Digest, cli.Size(img.Size), len(img.Layers), time.Since(start).Round(time.Millisecond))
		}
	}
	if asJSON {
		cli.PrintJSON(append([]*images.Image{}, pulled...))
	}
	return code
}

func list(store *images.Store, asJSON bool, con *cli.Console) int {
	all, err := store.List()
	if err != nil {
		con.Printf("sandbox-run: %v\n", err)
		return 1
	}
	if asJSON {
		cli.PrintJSON(append([]*images.Image{}, all...))
		return 0
	}
	if len(all) == 0 {
		fmt.Println("no images")
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REFERENCE\tDIGEST\tSIZE\tLAYERS\tPULLED")
	for _, img := range all {
		fmt.Fprintf(tw, "%s\t%.19s\t%s\t%d\t%s\n", img.Ref, img.Digest, cli.Size(img.Size), len(img.Layers), img.Pulled.Local().Format("2006-01-02 15:04:05"))
	}
	tw.Flush()
	return 0
}

func remove(store *images.Store, refs []string, asJSON bool, con *cli.Console) int {
	out := struct {
		Removed []string          `json:"removed"`
		Errors  map[string]string `json:"errors,omitempty"`
	}{Removed: []string{}}
	code := 0
	for _, ref := range refs {
		if err := store.Remove(ref); err != nil {
			if out.Errors == nil {
				out.Errors = map[string]string{}
			}
			out.Errors[ref] = err.Error()
			code = 1
			if !asJSON {
				con.Printf("sandbox-run: %v\n", err)
			}
			continue
		}
		out.Removed = append(out.Removed, ref)
		if !asJSON {
			fmt.Println("removed", ref)
		}
	}
	if asJSON {
		cli.PrintJSON(out)
	}
	return code
}
