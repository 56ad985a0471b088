//go:build unix

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// The docker part of bench --suite: /bin/true and python hello under
// "docker run --rm --network none IMAGE ...", interleaved with the same
// programs through the sandbox and plainly. No registry is reachable, so
// the image is imported from this host's own files: /bin/true, bash and
// python3 with the libraries ldd names and python's standard library (less
// its tests and GUI modules), so that docker runs the very binaries the
// sandbox runs. Without a docker engine the part says so and is skipped.

type benchDockerReport struct {
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	Docker  string `json:"docker,omitempty"`
	Image   string `json:"image,omitempty"`
	// ImageFiles and ImageMB are what went into the image.
	ImageFiles   int            `json:"image_files,omitempty"`
	ImageMB      float64        `json:"image_mb,omitempty"`
	ImportS      float64        `json:"import_seconds,omitempty"`
	RunArgv      []string       `json:"run_argv,omitempty"`
	N            int            `json:"n"`
	Warmup       int            `json:"warmup"`
	Rows         []benchRow     `json:"rows,omitempty"`
	Speedups     []benchSpeedup `json:"speedups,omitempty"`
	Notes        []string       `json:"notes,omitempty"`
	dockerBinary string
}

// benchSpeedup is docker run's p50 over the sandbox's for one program.
type benchSpeedup struct {
	Program    string  `json:"program"`
	Docker     string  `json:"docker_row"`
	Sandbox    string  `json:"sandbox_row"`
	DockerP50  float64 `json:"docker_p50_ms"`
	SandboxP50 float64 `json:"sandbox_p50_ms"`
	Speedup    float64 `json:"speedup"`
}

const (
	benchDockerTrue   = "docker run /bin/true"
	benchDockerPython = "docker run python3 -c hello"
	benchDockerFork   = "fork/exec /bin/true"
	benchDockerForkPy = "fork/exec python3 -c hello"
	benchDockerLib    = "sandbox.Run /bin/true"
	benchDockerAPI    = "API bash true"
	benchDockerAPIPy  = "API python hello"
)

func measureBenchDocker(o *benchOptions, b *benchServer) *benchDockerReport {
	rep := &benchDockerReport{N: o.dockerN, Warmup: min(o.warmup, 3), Image: o.dockerImage}
	if o.docker == "off" {
		rep.Skipped = "skipped: -docker off"
		return rep
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		rep.Skipped = "skipped: no docker engine (docker is not on PATH)"
		return rep
	}
	rep.dockerBinary = docker
	out, err := benchDockerCmd(docker, 20*time.Second, nil, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		rep.Skipped = "skipped: no docker engine (" + benchFirstLine(out, err) + ")"
		return rep
	}
	rep.Docker = fmt.Sprintf("%s, engine %s", docker, strings.TrimSpace(out))
	if drv, err := benchDockerCmd(docker, 20*time.Second, nil, "info", "--format", "{{.Driver}}, cgroup {{.CgroupVersion}}, runtime {{.DefaultRuntime}}"); err == nil {
		rep.Docker += ", " + strings.TrimSpace(drv)
	}

	// The image, built afresh from this host's files.
	t := time.Now()
	benchDockerCmd(docker, time.Minute, nil, "image", "rm", "-f", rep.Image)
	var tarred bytes.Buffer
	bt := &benchTar{tw: tar.NewWriter(&tarred), seen: map[string]bool{}}
	stdlib, err := exec.Command("/usr/bin/python3", "-c", "import os; print(os.path.dirname(os.__file__))").Output()
	if err != nil {
		rep.Error = "finding python's standard library: " + err.Error()
		return rep
	}
	if err := bt.addHost([]string{"/bin/true", "/bin/bash", "/usr/bin/python3"}, []string{strings.TrimSpace(string(stdlib))}); err != nil {
		rep.Error = "building the image: " + err.Error()
		return rep
	}
	if err := bt.tw.Close(); err != nil {
		rep.Error = "building the image: " + err.Error()
		return rep
	}
	rep.ImageFiles, rep.ImageMB = bt.files, float64(bt.bytes)/(1<<20)
	if out, err := benchDockerCmd(docker, 5*time.Minute, &tarred, "import", "-", rep.Image); err != nil {
		rep.Error = "docker import: " + benchFirstLine(out, err)
		return rep
	}
	rep.ImportS = time.Since(t).Seconds()

	run := []string{docker, "run", "--rm", "--network", "none", rep.Image}
	rep.RunArgv = run
	dockerRun := func(argv []string, want string) func() (time.Duration, error) {
		return benchPlain(append(append([]string{}, run...), argv...), want)
	}
	pyBody := []byte(`{"language":"python","code":"print(\"hello\")"}`)
	variants := []*benchVariant{
		{name: benchDockerFork, run: benchPlain([]string{"/bin/true"}, "")},
		{name: benchDockerTrue, run: dockerRun([]string{"/bin/true"}, "")},
		{name: benchDockerAPI, run: b.execute([]byte(benchAPIBody), "")},
		{name: benchDockerForkPy, run: benchPlain([]string{"/usr/bin/python3", "-c", `print("hello")`}, "hello\n")},
		{name: benchDockerPython, run: dockerRun([]string{"/usr/bin/python3", "-c", `print("hello")`}, "hello\n")},
		{name: benchDockerAPIPy, run: b.execute(pyBody, "hello\n")},
	}
	if b.engine != nil {
		variants = append(variants, &benchVariant{name: benchDockerLib, run: benchSandboxed(b.engine, []string{"/bin/true"}, "")})
	} else {
		rep.Notes = append(rep.Notes, "the sandbox.Run row needs the in-process server: not measured with -url")
	}
	benchInterleave(variants, rep.N, rep.Warmup, 0, 0, mrand.New(mrand.NewPCG(5, 6)))
	rows := map[string]*benchRow{}
	for _, v := range variants {
		rep.Rows = append(rep.Rows, benchRowOf(v))
	}
	for i := range rep.Rows {
		rows[rep.Rows[i].Name] = &rep.Rows[i]
	}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		base := rows[benchDockerFork]
		if strings.Contains(r.Name, "python") {
			base = rows[benchDockerForkPy]
		}
		if base.Runs > 0 && r.Runs > 0 {
			r.VsFork = r.P50 / base.P50
		}
	}
	for _, p := range []struct{ prog, docker, sandbox string }{
		{"/bin/true (API: bash true)", benchDockerTrue, benchDockerAPI},
		{"/bin/true (library)", benchDockerTrue, benchDockerLib},
		{"python hello", benchDockerPython, benchDockerAPIPy},
	} {
		d, s := rows[p.docker], rows[p.sandbox]
		if d == nil || s == nil || d.Runs == 0 || s.Runs == 0 {
			continue
		}
		rep.Speedups = append(rep.Speedups, benchSpeedup{Program: p.prog, Docker: p.docker, Sandbox: p.sandbox,
			DockerP50: d.P50, SandboxP50: s.P50, Speedup: d.P50 / s.P50})
	}
	return rep
}

// benchDockerCmd runs docker with args within d, stdin from in.
func benchDockerCmd(docker string, d time.Duration, in io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, docker, args...)
	cmd.Stdin = in
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// benchFirstLine is the first line of a command's output, or its error.
func benchFirstLine(out string, err error) string {
	if line, _, _ := strings.Cut(strings.TrimSpace(out), "\n"); line != "" {
		return line
	}
	return err.Error()
}

// benchTar writes host files into a tar, each once, with their parent
// directories and every symbolic link on their way.
type benchTar struct {
	tw    *tar.Writer
	seen  map[string]bool
	files int
	bytes int64
}

// benchTarSkip are the parts of a python standard library a hello world
// does not need.
var benchTarSkip = map[string]bool{"test": true, "idlelib": true, "tkinter": true, "turtledemo": true,
	"ensurepip": true, "lib2to3": true, "unittest": true, "pydoc_data": true}

// addHost adds programs with the shared libraries ldd lists for them, and
// the trees under dirs.
func (t *benchTar) addHost(programs, dirs []string) error {
	for _, p := range programs {
		if err := t.addPath(p, 0); err != nil {
			return err
		}
		libs, err := benchLibs(p)
		if err != nil {
			return err
		}
		for _, lib := range libs {
			if err := t.addPath(lib, 0); err != nil {
				return err
			}
		}
	}
	for _, d := range dirs {
		if err := t.addTree(d); err != nil {
			return err
		}
	}
	return nil
}

// benchLibs are the shared libraries and the loader of a program, as ldd
// lists them.
func benchLibs(program string) ([]string, error) {
	out, err := exec.Command("ldd", program).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", program, err)
	}
	return benchParseLdd(string(out)), nil
}

// benchParseLdd takes the paths out of ldd's output.
func benchParseLdd(out string) []string {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i := strings.Index(line, "=>"); i >= 0 {
			f = strings.Fields(line[i+2:])
		}
		if len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	return libs
}

// addPath adds p, resolving the symbolic links on its way: each link is
// added as a link, and what it points to as well.
func (t *benchTar) addPath(p string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("%s: too many levels of symbolic links", p)
	}
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur := "/"
	for i, name := range parts {
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if err := t.entry(next, fi, target); err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			return t.addPath(filepath.Join(append([]string{target}, parts[i+1:]...)...), depth+1)
		case fi.IsDir():
			if err := t.entry(next, fi, ""); err != nil {
				return err
			}
			cur = next
		case i == len(parts)-1:
			return t.entry(next, fi, "")
		default:
			return fmt.Errorf("%s: not a directory", next)
		}
	}
	return nil
}

// addTree adds dir and what is under it, less benchTarSkip's directories
// and links' targets outside it.
func (t *benchTar) addTree(dir string) error {
	if err := t.addPath(dir, 0); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != real && benchTarSkip[d.Name()] {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		return t.entry(p, fi, link)
	})
}

// entry writes one file, directory or link, once.
func (t *benchTar) entry(p string, fi fs.FileInfo, link string) error {
	if t.seen[p] {
		return nil
	}
	t.seen[p] = true
	if !fi.Mode().IsRegular() && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
		return nil // devices, sockets, pipes: not needed
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name = strings.TrimPrefix(p, "/")
	if fi.IsDir() {
		h.Name += "/"
	}
	h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	if err := t.tw.WriteHeader(h); err != nil {
		return err
	}
	t.files++
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(t.tw, f)
	t.bytes += n
	if err == nil && n != fi.Size() {
		err = errors.New(p + ": changed while read")
	}
	return err
}

func printBenchDocker(w io.Writer, d *benchDockerReport) {
	if d.Skipped != "" {
		fmt.Fprintln(w, d.Skipped)
		return
	}
	if d.Docker != "" {
		fmt.Fprintf(w, "docker: %s\n", d.Docker)
	}
	if d.Error != "" {
		fmt.Fprintf(w, "error: %s\n", d.Error)
		return
	}
	fmt.Fprintf(w, "image: %s, imported from this host's files (%d entries, %.1f MB, %.1f s): /bin/true, bash, python3, their libraries and python's standard library\n",
		d.Image, d.ImageFiles, d.ImageMB, d.ImportS)
	fmt.Fprintf(w, "docker rows: %s PROGRAM\n", strings.Join(d.RunArgv, " "))
	fmt.Fprintf(w, "%d measured (+%d warm-up) runs of each row, interleaved in an order shuffled per round; vs fork: over fork/exec of the same program\n\n", d.N, d.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\truns\terrors\tp50 ms\tp95 ms\tp99 ms\tmean ms\tcpu ms/run\tmachine cpu ms/run\tvs fork p50\t")
	for _, r := range d.Rows {
		if r.Runs == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t-\t-\t-\t-\t-\t-\t-\t\n", r.Name, r.Runs, r.Errors)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", r.Name, r.Runs, r.Errors, r.P50, r.P95, r.P99, r.Mean, r.CPUms, benchCell(r.MachineCPUms), benchRatio(r.VsFork))
	}
	tw.Flush()
	printBenchErrors(w, d.Rows)
	fmt.Fprintln(w, "\nspeedup of sandbox-run over docker run (docker p50 / sandbox p50):")
	for _, s := range d.Speedups {
		fmt.Fprintf(w, "  %-28s %8.2f ms / %6.2f ms = %6.1fx  (%s)\n", s.Program, s.DockerP50, s.SandboxP50, s.Speedup, s.Sandbox)
	}
	for _, n := range d.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	fmt.Fprintln(w, "cpu ms/run is this process and its children (for docker rows the docker client only); machine cpu covers dockerd, containerd and runc too")
}
