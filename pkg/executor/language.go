package executor

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

//go:embed languages.yaml
var defaultLanguages []byte

// languageFragments are the files of languages.d, each a languages document
// read after languages.yaml in name order: an entry there adds a version or
// a language, or replaces the entry with the same name and toolchain path.
//
//go:embed languages.d
var languageFragments embed.FS

// Language is one entry of languages.yaml.
type Language struct {
	Name          string            `yaml:"name" json:"name"`
	Aliases       []string          `yaml:"aliases" json:"aliases,omitempty"`
	Extensions    []string          `yaml:"extensions" json:"extensions,omitempty"`
	Source        string            `yaml:"source" json:"-"`
	MainName      *MainName         `yaml:"main_name" json:"-"`
	Toolchain     []string          `yaml:"toolchain" json:"-"`
	Mounts        []string          `yaml:"mounts" json:"-"`
	VersionCmd    []string          `yaml:"version" json:"-"`
	Compile       []string          `yaml:"compile" json:"-"`
	Artifacts     []string          `yaml:"artifacts" json:"-"`
	Run           []string          `yaml:"run" json:"-"`
	Env           map[string]string `yaml:"env" json:"-"`
	Limits        LimitOverrides    `yaml:"limits" json:"-"`
	CompileLimits LimitOverrides    `yaml:"compile_limits" json:"-"`
	Cache         *CacheSpec        `yaml:"cache" json:"-"`
	// Default marks the entry a request without a version gets when several
	// entries share the name (one per installed version).
	Default bool `yaml:"default" json:"-"`
	// Image, when set, backs the entry with an OCI image (pkg/images): its
	// runs have the image as their root and find the toolchain in it
	// (e.g. a python entry on python:3.13-slim). ImageVersion is the
	// version it offers, for choosing it by version and listing it
	// without pulling the image; results report the version found in it.
	Image        string `yaml:"image" json:"-"`
	ImageVersion string `yaml:"image_version" json:"-"`
}

// MainName derives the program's main name from its code (Java's public
// class must match its file name).
type MainName struct {
	Regex   string `yaml:"regex"`
	Default string `yaml:"default"`
	re      *regexp.Regexp
}

// CacheSpec is a toolchain cache prepared once and shared read-only.
type CacheSpec struct {
	Dir     string   `yaml:"dir"`
	Prepare []string `yaml:"prepare"`
	// Quick, optional, prepares a cache of what most programs need (Go:
	// the packages most programs import) in a fraction of Prepare's time.
	// While a server prepares both in the background, a compile that
	// would wait for Prepare's waits for Quick's instead (the first
	// request on a new host); once Prepare's is ready, compiles use it.
	Quick []string `yaml:"quick"`
}

// LimitOverrides are per-language defaults; zero fields leave the global
// default in place.
type LimitOverrides struct {
	MemoryMB    int64   `yaml:"memory_mb" json:"memory_mb,omitempty"`
	Processes   int     `yaml:"processes" json:"processes,omitempty"`
	CPUs        float64 `yaml:"cpus" json:"cpus,omitempty"`
	WallSeconds float64 `yaml:"wall_seconds" json:"wall_seconds,omitempty"`
	CPUSeconds  float64 `yaml:"cpu_seconds" json:"cpu_seconds,omitempty"`
	TmpMB       int64   `yaml:"tmp_mb" json:"tmp_mb,omitempty"`
}

// Compiled reports whether the language has a compile step.
func (l *Language) Compiled() bool { return len(l.Compile) > 0 }

// Toolchain is a language's toolchain as found on this host.
type Toolchain struct {
	Bin     string // host path of the main binary, symlinks resolved
	Home    string // directory above Bin's bin/
	Version string
	Mounts  []mountPair
	Err     error // why the toolchain is unavailable

	// Root is the host directory of the image's root filesystem when the
	// toolchain is inside an image (Bin and Home are then paths inside
	// it); ImageRef, ImageDigest and ImageEnv say which image and what
	// environment its config sets.
	Root        string
	ImageRef    string
	ImageDigest string
	ImageEnv    []string
}

type mountPair struct{ Source, Target string }

type languageFile struct {
	Languages []Language `yaml:"languages"`
}

// ParseLanguages reads a languages.yaml document and checks every entry.
func ParseLanguages(data []byte) ([]Language, error) {
	var f languageFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("languages: %w", err)
	}
	seen := make(map[string]string)
	for i := range f.Languages {
		l := &f.Languages[i]
		if err := l.check(); err != nil {
			return nil, err
		}
		for _, n := range append([]string{l.Name}, l.Aliases...) {
			n = strings.ToLower(n)
			if other, dup := seen[n]; dup && other != l.Name {
				return nil, fmt.Errorf("languages: %q names both %s and %s", n, other, l.Name)
			}
			seen[n] = l.Name
		}
	}
	return f.Languages, nil
}

func (l *Language) check() error {
	switch {
	case l.Name == "":
		return errors.New("languages: an entry has no name")
	case l.Source == "":
		return fmt.Errorf("languages: %s: no source file name", l.Name)
	case len(l.Toolchain) == 0:
		return fmt.Errorf("languages: %s: no toolchain candidates", l.Name)
	case len(l.Run) == 0:
		return fmt.Errorf("languages: %s: no run command", l.Name)
	case l.Compiled() && len(l.Artifacts) == 0:
		return fmt.Errorf("languages: %s: a compile step needs artifacts", l.Name)
	case l.Image != "" && l.ImageVersion == "" && len(l.VersionCmd) > 0:
		return fmt.Errorf("languages: %s: an entry with an image needs image_version (the version it offers)", l.Name)
	}
	if l.MainName != nil {
		re, err := regexp.Compile(l.MainName.Regex)
		if err != nil {
			return fmt.Errorf("languages: %s: main_name: %w", l.Name, err)
		}
		if re.NumSubexp() < 1 || l.MainName.Default == "" {
			return fmt.Errorf("languages: %s: main_name needs a capture group and a default", l.Name)
		}
		l.MainName.re = re
	}
	l.Name = strings.ToLower(l.Name)
	return nil
}

// mainName returns the program's main name for code.
func (l *Language) mainName(code []byte) string {
	if l.MainName == nil {
		return "main"
	}
	if m := l.MainName.re.FindSubmatch(code); m != nil {
		return string(m[1])
	}
	return l.MainName.Default
}

// Registry is the set of languages with their discovered toolchains. Several
// entries may share a name, one per toolchain version: a name (or alias)
// names all of them, and Resolve picks one by version.
type Registry struct {
	langs  []*Language
	names  []string               // the language names, in file order
	groups map[string][]*Language // name → its entries, in file order
	byName map[string]string      // name or alias → name
	byExt  map[string]string      // extension → name
	home   string

	mu         sync.Mutex
	found      map[*Language]*toolchainSlot
	generation atomic.Int64 // Refresh
}

type toolchainSlot struct {
	once sync.Once
	tc   *Toolchain
	done atomic.Bool // tc is found (Refresh finds those again)
}

// mergeLanguages adds the entries of extra to base: an entry with the same
// name and the same (first) toolchain candidate as one in base replaces it,
// any other is added.
func mergeLanguages(base, extra []Language) []Language {
	for _, u := range extra {
		replaced := false
		for i := range base {
			if base[i].Name == u.Name && base[i].Toolchain[0] == u.Toolchain[0] {
				base[i], replaced = u, true
			}
		}
		if !replaced {
			base = append(base, u)
		}
	}
	return base
}

// embeddedLanguages is languages.yaml with the fragments of languages.d.
func embeddedLanguages() ([]Language, error) {
	langs, err := ParseLanguages(defaultLanguages)
	if err != nil {
		return nil, err
	}
	files, _ := fs.Glob(languageFragments, "languages.d/*.yaml")
	sort.Strings(files)
	for _, f := range files {
		data, err := languageFragments.ReadFile(f)
		if err != nil {
			return nil, err
		}
		more, err := ParseLanguages(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		langs = mergeLanguages(langs, more)
	}
	return langs, nil
}

// NewRegistry builds a registry from the embedded languages.yaml and
// languages.d/*.yaml, extended by the user file at path (if not empty): a
// user entry with the name and toolchain of an embedded one replaces it,
// any other is added (a new language, or another version of one).
func NewRegistry(path string) (*Registry, error) {
	langs, err := embeddedLanguages()
	if err != nil {
		return nil, err
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		user, err := ParseLanguages(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		langs = mergeLanguages(langs, user)
	}
	home, _ := os.UserHomeDir()
	r := &Registry{groups: map[string][]*Language{}, byName: map[string]string{}, byExt: map[string]string{}, found: map[*Language]*toolchainSlot{}, home: home}
	for i := range langs {
		l := &langs[i]
		r.langs = append(r.langs, l)
		if _, ok := r.groups[l.Name]; !ok {
			r.names = append(r.names, l.Name)
		}
		r.groups[l.Name] = append(r.groups[l.Name], l)
		r.found[l] = &toolchainSlot{}
		for _, n := range append([]string{l.Name}, l.Aliases...) {
			n = strings.ToLower(n)
			if other, dup := r.byName[n]; dup && other != l.Name {
				return nil, fmt.Errorf("languages: %q is used twice", n)
			}
			r.byName[n] = l.Name
		}
		for _, e := range l.Extensions {
			e = strings.ToLower(strings.TrimPrefix(e, "."))
			if _, dup := r.byExt[e]; !dup {
				r.byExt[e] = l.Name
			}
		}
	}
	return r, nil
}

// Languages lists every entry (every version of every language), in file
// order.
func (r *Registry) Languages() []*Language { return r.langs }

// LanguageNames lists the names of the languages, each once, in file order.
func (r *Registry) LanguageNames() []string { return r.names }

// Entries lists the entries of a language (by name or alias), in file order.
func (r *Registry) Entries(name string) []*Language {
	return r.groups[r.byName[strings.ToLower(strings.TrimSpace(name))]]
}

// Lookup finds a language by name or alias (case-insensitive): the entry a
// request without a version gets (see Resolve), or when none is available
// the default (or first) entry.
func (r *Registry) Lookup(name string) (*Language, bool) {
	entries := r.Entries(name)
	if len(entries) == 0 {
		return nil, false
	}
	if l, _, err := r.pick(name, entries, ""); err == nil {
		return l, true
	}
	return preferred(entries), true
}

// preferred is the entry of entries a request without a version gets
// when all are available: the one marked default, else the first.
func preferred(entries []*Language) *Language {
	for _, l := range entries {
		if l.Default {
			return l
		}
	}
	return entries[0]
}

// ByExtension finds the language of a file name.
func (r *Registry) ByExtension(file string) (*Language, bool) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	name, ok := r.byExt[ext]
	if !ok {
		return nil, false
	}
	return r.Lookup(name)
}

// Names lists the primary names of the languages with at least one
// toolchain here.
func (r *Registry) Names() []string {
	var names []string
	for _, n := range r.names {
		for _, l := range r.groups[n] {
			if r.Toolchain(l).Err == nil {
				names = append(names, n)
				break
			}
		}
	}
	sort.Strings(names)
	return names
}

// Resolve finds a language by name or alias and the toolchain of the version
// asked for: among the entries of that name whose toolchain is here, the one
// whose version equals version or starts with version+"." (e.g. "3.12" →
// 3.12.1; the default entry first, then the newest); with version "" the
// default entry, else the first available. The error is an
// *UnsupportedLanguageError (listing the installed versions).
func (r *Registry) Resolve(name, version string) (*Language, *Toolchain, error) {
	entries := r.Entries(name)
	if len(entries) == 0 {
		return nil, nil, &UnsupportedLanguageError{Language: name, Known: r.Names()}
	}
	return r.pick(name, entries, strings.TrimSpace(version))
}

func (r *Registry) pick(name string, entries []*Language, version string) (*Language, *Toolchain, error) {
	r.discoverAll(entries)
	var avail []*Language
	for _, l := range entries {
		if r.Toolchain(l).Err == nil {
			avail = append(avail, l)
		}
	}
	if len(avail) == 0 {
		return nil, nil, &UnsupportedLanguageError{Language: name, Reason: r.Toolchain(preferred(entries)).Err.Error()}
	}
	if version == "" {
		l := preferred(avail)
		return l, r.Toolchain(l), nil
	}
	var best *Language
	for _, exact := range []bool{true, false} {
		for _, l := range avail {
			v := r.Toolchain(l).Version
			if !(v == version || !exact && (strings.HasPrefix(v, version+".") || strings.HasSuffix(v, "-"+version))) {
				continue
			}
			if best == nil || l.Default && !best.Default || !best.Default && compareVersions(v, r.Toolchain(best).Version) > 0 {
				best = l
			}
		}
		if best != nil {
			return best, r.Toolchain(best), nil
		}
	}
	var have []string
	for _, l := range avail {
		have = append(have, r.Toolchain(l).Version)
	}
	return nil, nil, &UnsupportedLanguageError{Language: name, Reason: fmt.Sprintf("version %q is not installed (installed: %s)", version, strings.Join(have, ", "))}
}

// compareVersions compares dotted version numbers numerically.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// discoverAll finds the toolchains of entries side by side (each version
// check starts a toolchain).
func (r *Registry) discoverAll(entries []*Language) {
	if len(entries) < 2 {
		return
	}
	var wg sync.WaitGroup
	for _, l := range entries {
		wg.Add(1)
		go func() { defer wg.Done(); r.Toolchain(l) }()
	}
	wg.Wait()
}

// searchPath is where bare toolchain names are looked up: the system's
// directories, never the server's own PATH (which may hold shims).
var searchPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// Toolchain finds (once) and returns the toolchain of entry l.
func (r *Registry) Toolchain(l *Language) *Toolchain {
	r.mu.Lock()
	slot, ok := r.found[l]
	if !ok { // an entry from elsewhere: found by its own
		slot = &toolchainSlot{}
		r.found[l] = slot
	}
	r.mu.Unlock()
	slot.once.Do(func() { slot.tc = r.discover(l); slot.done.Store(true) })
	return slot.tc
}

func (r *Registry) discover(l *Language) *Toolchain {
	if l.Image != "" {
		// Found in the image when a run pulls it (Executor.resolveImage).
		return &Toolchain{Version: l.ImageVersion, ImageRef: l.Image}
	}
	tc := &Toolchain{Bin: firstFound(l.Toolchain, r.findBinary)}
	if tc.Bin == "" {
		tc.Err = fmt.Errorf("no toolchain found (looked for %s)", strings.Join(l.Toolchain, ", "))
		return tc
	}
	tc.Home = filepath.Dir(filepath.Dir(tc.Bin))
	vars := map[string]string{"bin": tc.Bin, "home": tc.Home}
	for _, m := range l.Mounts {
		src, dst, _ := strings.Cut(expand(m, vars), ":")
		matches, _ := filepath.Glob(r.expandHome(src))
		for _, s := range matches {
			t := dst
			if t == "" {
				t = s
			}
			tc.Mounts = append(tc.Mounts, mountPair{s, t})
		}
	}
	if len(l.VersionCmd) > 0 {
		argv := expandAll(l.VersionCmd, vars)
		out, err := versionCheck(argv)
		if err != nil {
			tc.Err = fmt.Errorf("version check %q failed: %v", argv, err)
			return tc
		}
		tc.Version = versionOf(string(out))
	}
	return tc
}

// firstFound is the first of a language's toolchain candidates that find
// resolves, or "".
func firstFound(cands []string, find func(string) string) string {
	for _, cand := range cands {
		if bin := find(cand); bin != "" {
			return bin
		}
	}
	return ""
}

// versionCheck runs a toolchain's version command on the host, in a
// directory of its own that is its HOME, TMPDIR and working directory,
// removed afterwards: whatever the toolchain writes there (caches, crash
// logs) goes with it. Go's telemetry is turned off there, and the JVM's
// performance data, which it keeps in /tmp/hsperfdata_<user> whatever
// TMPDIR says, by -XX:-UsePerfData.
func versionCheck(argv []string) ([]byte, error) {
	staleVersionDirs.Do(removeStaleVersionDirs)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", versionDirPrefix, os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Go's telemetry is off only by its mode file (GOTELEMETRY cannot be
	// set): with the default, "local", the go command writes counters and
	// starts a child that outlives it, writing them after we removed dir.
	goTelemetry := filepath.Join(dir, ".config", "go", "telemetry")
	if err := os.MkdirAll(goTelemetry, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(goTelemetry, "mode"), []byte("off"), 0o644); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = versionCheckEnv(dir)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return dropJVMNotice(out), err
}

// versionDirPrefix names the directories of version checks, with the pid of
// the process that runs them: a process that ends during a check (a server
// stopped while it discovers its toolchains) cannot remove its own.
const versionDirPrefix = "sandbox-run-version-"

var staleVersionDirs sync.Once

// removeStaleVersionDirs removes the version checks' directories that
// processes no longer running left in the temporary directory.
func removeStaleVersionDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), versionDirPrefix+"*-*"))
	for _, m := range matches {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(m), versionDirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(m)
		}
	}
}

// versionCheckEnv is the environment of a version command run in dir.
func versionCheckEnv(dir string) []string {
	return []string{
		"PATH=" + strings.Join(searchPath, ":"),
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(dir, ".local", "share"),
		"LANG=C.UTF-8",
		"JAVA_TOOL_OPTIONS=" + jvmNoPerfData,
	}
}

const jvmNoPerfData = "-XX:-UsePerfData"

// dropJVMNotice removes the line a JVM prints when it takes options from
// JAVA_TOOL_OPTIONS, which would otherwise be taken for the version.
func dropJVMNotice(out []byte) []byte {
	var kept [][]byte
	for _, line := range bytes.SplitAfter(out, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("Picked up JAVA_TOOL_OPTIONS:")) {
			kept = append(kept, line)
		}
	}
	return bytes.Join(kept, nil)
}

// versionNumber is a version number, with a pre-release channel such as
// rustc's "1.97.0-nightly".
var versionNumber = regexp.MustCompile(`\d+\.\d+(\.\d+)?(-(nightly|beta|alpha|dev|rc)[0-9.]*)?`)

// versionOf picks the version number out of a version command's output.
func versionOf(out string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if v := versionNumber.FindString(line); v != "" {
		return v
	}
	return strings.TrimSpace(line)
}

func (r *Registry) expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok && r.home != "" {
		return filepath.Join(r.home, rest)
	}
	return p
}

// findBinary resolves one toolchain candidate to a real executable.
func (r *Registry) findBinary(cand string) string {
	cand = r.expandHome(cand)
	var paths []string
	switch {
	case strings.ContainsAny(cand, "*?["):
		paths, _ = filepath.Glob(cand)
		sort.Sort(sort.Reverse(sort.StringSlice(paths))) // newest version first
	case strings.Contains(cand, "/"):
		paths = []string{cand}
	default:
		for _, d := range searchPath {
			paths = append(paths, filepath.Join(d, cand))
		}
	}
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return real
		}
	}
	return ""
}

var templateVar = regexp.MustCompile(`\{[a-z_]+\}`)

// expand replaces {name} by vars[name]; unknown names stay as they are.
func expand(s string, vars map[string]string) string {
	return templateVar.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func expandAll(argv []string, vars map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = expand(a, vars)
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
