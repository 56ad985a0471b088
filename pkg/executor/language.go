package executor

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

//go:embed languages.yaml
var defaultLanguages []byte

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
			if other, dup := seen[n]; dup {
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

// Registry is the set of languages with their discovered toolchains.
type Registry struct {
	langs  []*Language
	byName map[string]*Language
	byExt  map[string]*Language
	home   string

	mu    sync.Mutex
	found map[string]*Toolchain
}

// NewRegistry builds a registry from the embedded languages.yaml, replaced
// or extended entry by entry by the user file at path (if not empty).
func NewRegistry(path string) (*Registry, error) {
	langs, err := ParseLanguages(defaultLanguages)
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
		for _, u := range user {
			replaced := false
			for i := range langs {
				if langs[i].Name == u.Name {
					langs[i], replaced = u, true
				}
			}
			if !replaced {
				langs = append(langs, u)
			}
		}
	}
	home, _ := os.UserHomeDir()
	r := &Registry{byName: map[string]*Language{}, byExt: map[string]*Language{}, found: map[string]*Toolchain{}, home: home}
	for i := range langs {
		l := &langs[i]
		r.langs = append(r.langs, l)
		for _, n := range append([]string{l.Name}, l.Aliases...) {
			if _, dup := r.byName[strings.ToLower(n)]; dup {
				return nil, fmt.Errorf("languages: %q is used twice", n)
			}
			r.byName[strings.ToLower(n)] = l
		}
		for _, e := range l.Extensions {
			e = strings.ToLower(strings.TrimPrefix(e, "."))
			if _, dup := r.byExt[e]; !dup {
				r.byExt[e] = l
			}
		}
	}
	return r, nil
}

// Languages lists every entry, in file order.
func (r *Registry) Languages() []*Language { return r.langs }

// Lookup finds a language by name or alias (case-insensitive).
func (r *Registry) Lookup(name string) (*Language, bool) {
	l, ok := r.byName[strings.ToLower(strings.TrimSpace(name))]
	return l, ok
}

// ByExtension finds the language of a file name.
func (r *Registry) ByExtension(file string) (*Language, bool) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	l, ok := r.byExt[ext]
	return l, ok
}

// Names lists the primary names of the languages whose toolchain is here.
func (r *Registry) Names() []string {
	var names []string
	for _, l := range r.langs {
		if r.Toolchain(l).Err == nil {
			names = append(names, l.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Resolve finds a language by name and its toolchain, of the version asked
// for (a prefix such as "3.11"; "" takes what is installed). The error is an
// *UnsupportedLanguageError.
func (r *Registry) Resolve(name, version string) (*Language, *Toolchain, error) {
	lang, ok := r.Lookup(name)
	if !ok {
		return nil, nil, &UnsupportedLanguageError{Language: name, Known: r.Names()}
	}
	tc := r.Toolchain(lang)
	if tc.Err != nil {
		return nil, nil, &UnsupportedLanguageError{Language: name, Reason: tc.Err.Error()}
	}
	if version != "" && tc.Version != version && !strings.HasPrefix(tc.Version, version+".") {
		return nil, nil, &UnsupportedLanguageError{Language: name, Reason: fmt.Sprintf("version %q is not installed (have %s)", version, tc.Version)}
	}
	return lang, tc, nil
}

// searchPath is where bare toolchain names are looked up: the system's
// directories, never the server's own PATH (which may hold shims).
var searchPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// Toolchain finds (once) and returns the toolchain of l.
func (r *Registry) Toolchain(l *Language) *Toolchain {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tc, ok := r.found[l.Name]; ok {
		return tc
	}
	tc := r.discover(l)
	r.found[l.Name] = tc
	return tc
}

func (r *Registry) discover(l *Language) *Toolchain {
	tc := &Toolchain{}
	for _, cand := range l.Toolchain {
		if bin := r.findBinary(cand); bin != "" {
			tc.Bin = bin
			break
		}
	}
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=" + strings.Join(searchPath, ":"), "HOME=/tmp", "LANG=C.UTF-8"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			tc.Err = fmt.Errorf("version check %q failed: %v", argv, err)
			return tc
		}
		tc.Version = versionOf(string(out))
	}
	return tc
}

var versionNumber = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

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
