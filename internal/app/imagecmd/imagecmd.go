// Package imagecmd is the command `sandbox-run images pull|ls|rm|prune`:
// it manages the OCI images of a data dir's store (pkg/images), the one a
// CLI's `execute --image` and a server on that data dir use; and `images
// import`, which makes an image (an OCI image layout) of a root
// filesystem, a directory or a tar archive, without docker.
package imagecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
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
       sandbox-run images import SOURCE oci:/DIR[:TAG] [--env K=V]... [--workdir DIR] [--keep-owners] [--mtime SECONDS]

Manages the OCI images that runs use as their root filesystem
('sandbox-run execute --image REF'), kept under DATA_DIR/images:
  pull   fetches each image from its source (a tag is looked up again) and
         unpacks it, so that the next run starts at once; progress on a terminal
  ls     lists the images by reference: digest, size, when pulled
  rm     forgets references (prune then frees their layers)
  prune  removes the images, layers and unpacked trees no reference needs
  import makes an image of the root filesystem SOURCE: a directory (made
         with debootstrap, or files copied in), a tar archive of one (plain,
         gzip or zstd) or - for an archive on standard input. It writes a
         one-layer image to the OCI image layout DIR, tagged TAG (default
         latest): a new layout, or one that exists, which gets the tag (a
         tag it has already is moved). Symlinks are kept as symlinks, files
         are owned by root, sockets and devices are left out; the same tree
         gives the same digest. Run it with 'execute --image oci:/DIR:TAG'.

REF is what docker takes (python:3.12-slim, ghcr.io/org/img:tag,
name@sha256:..., 127.0.0.1:5000/img for a local registry over plain HTTP),
oci:/DIR[:TAG] (an OCI image layout) or docker-archive:/FILE.tar (docker save).
Registry credentials come from ~/.docker/config.json (or $DOCKER_CONFIG).
No docker daemon is needed for any of it.

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
	var imp importFlags
	fs.Var(&imp.env, "env", "import: an environment variable `K=V` of the image (repeatable; without PATH the image\ngets docker's default PATH)")
	fs.StringVar(&imp.workdir, "workdir", "", "import: the image's working `DIR` (sandbox-run's runs start in /work regardless)")
	fs.BoolVar(&imp.keepOwners, "keep-owners", false, "import: keep the files' uid and gid (otherwise all are root's)")
	fs.StringVar(&imp.mtime, "mtime", "", "import: the mtime of every file, in `SECONDS` since 1970 (otherwise each keeps its own),\nso that copies of a tree give the same digest")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if format != "text" && format != "json" {
		return fatalf(cli.ExitUsage, "--output-format must be text or json, not %q", format)
	}
	if len(words) == 0 {
		con.Message("sandbox-run: images wants pull, ls, rm, prune or import\n" + cli.UsageHint(fs))
		return cli.ExitUsage
	}
	asJSON := format == "json"
	cmd, refs := words[0], words[1:]
	if cmd == "import" {
		return importImage(refs, imp, asJSON, con)
	}
	var importOnly string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "env" || f.Name == "workdir" || f.Name == "keep-owners" || f.Name == "mtime" {
			importOnly = f.Name
		}
	})
	if importOnly != "" {
		return fatalf(cli.ExitUsage, "--%s is a flag of images import, not of images %s", importOnly, cmd)
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fatalf(cli.ExitUsage, "config: %v", err)
	}
	for _, ref := range refs {
		if _, err := images.ParseRef(ref); err != nil {
			return fatalf(cli.ExitUsage, "%v", err)
		}
	}
	switch cmd {
	case "pull", "ls", "list", "rm", "remove", "prune":
	default:
		con.Message(fmt.Sprintf("sandbox-run: unknown images command %q: use pull, ls, rm, prune or import\n", cmd) + cli.UsageHint(fs))
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

// importFlags are the flags of images import.
type importFlags struct {
	env        cli.List
	workdir    string
	keepOwners bool
	mtime      string
}

// maxWarnings is how many entries left out images import names on stderr
// (JSON output lists them all).
const maxWarnings = 10

// importImage is images import SOURCE oci:/DIR[:TAG].
func importImage(args []string, f importFlags, asJSON bool, con *cli.Console) int {
	fatalf := func(code int, format string, a ...any) int {
		con.Printf("sandbox-run: images import: "+format+"\n", a...)
		return code
	}
	if len(args) != 2 {
		return fatalf(cli.ExitUsage, "wants SOURCE (a directory, a tar archive or -) and the image to write, oci:/DIR[:TAG]")
	}
	src := args[0]
	dst, err := images.ParseRef(args[1])
	if err != nil {
		return fatalf(cli.ExitUsage, "%v", err)
	}
	if dst.Kind != images.Layout {
		return fatalf(cli.ExitUsage, "the image is written as an OCI image layout: name it oci:/DIR[:TAG], not %s", args[1])
	}
	opts := images.ImportOptions{Env: f.env, WorkingDir: f.workdir, KeepOwners: f.keepOwners}
	if f.mtime != "" {
		n, err := strconv.ParseInt(f.mtime, 10, 64)
		if err != nil || n < 0 {
			return fatalf(cli.ExitUsage, "--mtime wants seconds since 1970 (0, or $SOURCE_DATE_EPOCH), not %q", f.mtime)
		}
		t := time.Unix(n, 0).UTC()
		opts.MTime = &t
	}
	warned := 0
	opts.Warn = func(msg string) {
		if warned++; warned <= maxWarnings {
			con.Printf("sandbox-run: images import: left out %s\n", msg)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second ^C ends the command at once
	}()
	start := time.Now()
	var res *images.Imported
	if src == "-" {
		if cli.IsTerminal(os.Stdin) {
			return fatalf(cli.ExitUsage, "- reads a tar archive from standard input, which is a terminal here")
		}
		res, err = images.ImportTar(ctx, os.Stdin, "standard input", dst, opts)
	} else {
		res, err = images.ImportPath(ctx, src, dst, opts)
	}
	if warned > maxWarnings {
		con.Printf("sandbox-run: images import: and %d more left out\n", warned-maxWarnings)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return fatalf(cli.ExitInterrupted, "interrupted: nothing written")
	case errors.Is(err, images.ErrImport):
		return fatalf(cli.ExitUsage, "%v", err)
	case err != nil:
		return fatalf(1, "%v", err)
	}
	if asJSON {
		cli.PrintJSON(res)
	} else {
		fmt.Printf("%s %s (%s, %d entries) in %v\n", res.Ref, res.Digest, cli.Size(res.Size), res.Entries, time.Since(start).Round(time.Millisecond))
	}
	return 0
}
