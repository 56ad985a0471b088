package runner

import (
	"fmt"
	"slices"
	"strings"
)

// LiveTemplate is what a live sandbox is made from, by the name a caller
// gives it: the languages whose toolchains it has.
type LiveTemplate struct {
	// Name is the template's name ("base" for none).
	Name string
	// Languages are its languages, by their names (those not installed
	// on this host are left out of the sandbox when it starts).
	Languages []string
	// Default: the default template (base), whose languages a sandbox
	// created with none named has anyway.
	Default bool
	// Interpreter: the code interpreter's template (E2B's
	// code-interpreter-v1), its languages those of interpreter kernels.
	Interpreter bool
}

// defaultLiveLanguages are executor.DefaultLiveLanguages (the service
// links no executor; its tests check that the two agree).
var defaultLiveLanguages = []string{"python", "javascript", "bash"}

// interpreterTemplates are the code interpreter's templates' names: E2B's
// and its SDK's.
var interpreterTemplates = []string{"code-interpreter-v1", "code-interpreter"}

// LiveTemplate resolves a template's name, as every door takes it: "" or
// base (the default languages), code-interpreter-v1 (Python, JavaScript
// and bash), a language's name (it and bash), or names joined with +
// (python+go: each, and bash). Another name is an Invalid *Error.
func (s *Service) LiveTemplate(name string) (LiveTemplate, error) {
	switch {
	case name == "" || name == "base":
		return LiveTemplate{Name: "base", Languages: slices.Clone(defaultLiveLanguages), Default: true}, nil
	case slices.Contains(interpreterTemplates, name):
		return LiveTemplate{Name: name, Languages: []string{"python", "javascript", "bash"}, Interpreter: true}, nil
	}
	t := LiveTemplate{Name: name}
	for _, part := range strings.Split(name, "+") {
		l, ok := s.x.Lookup(part)
		if !ok {
			return LiveTemplate{}, &Error{Kind: Invalid, Msg: fmt.Sprintf("unknown template %q: give base, code-interpreter-v1, "+
				"a language's name (python) or names joined with + (python+go)", name)}
		}
		if !slices.Contains(t.Languages, l.Name) {
			t.Languages = append(t.Languages, l.Name)
		}
	}
	if !slices.Contains(t.Languages, "bash") {
		t.Languages = append(t.Languages, "bash")
	}
	return t, nil
}
