package images

import (
	"regexp"
	"strings"
)

// Policy says which image references a server accepts in requests: a
// list of patterns where "*" matches any run of characters but "/", "**"
// any run at all and "?" one character but "/". A reference is allowed
// when a pattern matches it as written, in its canonical form
// ("docker.io/library/python:3.12") or in its short form ("python:3.12");
// a pattern that names no tag or digest allows every tag and digest of
// its repository. The zero Policy allows nothing.
type Policy struct {
	patterns []*regexp.Regexp
}

// NewPolicy compiles patterns.
func NewPolicy(patterns []string) Policy {
	var p Policy
	for _, pat := range patterns {
		pat = strings.TrimSpace(pat)
		if pat == "" {
			continue
		}
		expr := globExpr(pat)
		if last := pat[strings.LastIndexByte(pat, '/')+1:]; !strings.ContainsAny(last, ":@*") {
			expr += `([:@].*)?` // no tag or digest: any
		}
		p.patterns = append(p.patterns, regexp.MustCompile(`^`+expr+`$`))
	}
	return p
}

// Empty reports whether the policy allows nothing.
func (p Policy) Empty() bool { return len(p.patterns) == 0 }

// Allows reports whether ref (as a user wrote it, valid for ParseRef) is
// allowed.
func (p Policy) Allows(ref string) bool {
	forms := []string{ref}
	if r, err := ParseRef(ref); err == nil {
		canon := r.String()
		forms = append(forms, canon)
		for _, prefix := range []string{"index.docker.io/library/", "docker.io/library/", "index.docker.io/", "docker.io/"} {
			if short, ok := strings.CutPrefix(canon, prefix); ok && r.Kind == Registry {
				forms = append(forms, short)
				break
			}
		}
	}
	for _, re := range p.patterns {
		for _, f := range forms {
			if re.MatchString(f) {
				return true
			}
		}
	}
	return false
}

// globExpr is the regular expression of a glob pattern.
func globExpr(pat string) string {
	var b strings.Builder
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; {
		case c == '*' && i+1 < len(pat) && pat[i+1] == '*':
			b.WriteString(`.*`)
			i++
		case c == '*':
			b.WriteString(`[^/]*`)
		case c == '?':
			b.WriteString(`[^/]`)
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}
