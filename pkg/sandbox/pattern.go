package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// The output-file pattern language (Collect.Patterns, and the executor's
// request patterns): a pattern is a slash-separated path relative to /work.
// Each element is matched as by path.Match against one element of the
// file's path: '*' matches any run of characters but '/', '?' one
// character but '/', '[a-z]' and '[^a-z]' a class, '\' escapes. An element
// that is exactly "**" matches any number of directories: none or more in
// front ("**/*.txt" matches "a.txt" and "x/y/a.txt"), one or more (every
// file below) at the end ("out/**" matches "out/a" and "out/x/b" but not a
// file named "out"). A pattern without wildcards names one file.

// MatchPattern reports whether the relative, slash-separated path p
// matches pattern. A malformed pattern matches nothing (ValidatePattern
// says why).
func MatchPattern(pattern, p string) bool {
	pat := strings.Split(pattern, "/")
	name := strings.Split(p, "/")
	// ok[i][j]: pat[i:] matches name[j:]; filled from the end so that any
	// number of "**" costs len(pat)*len(name) steps, never backtracking.
	n, m := len(pat), len(name)
	ok := make([][]bool, n+1)
	for i := range ok {
		ok[i] = make([]bool, m+1)
	}
	ok[n][m] = true
	for i := n - 1; i >= 0; i-- {
		for j := m; j >= 0; j-- {
			switch {
			case pat[i] == "**" && i == n-1:
				ok[i][j] = j < m // at the end: one or more elements
			case pat[i] == "**":
				ok[i][j] = ok[i+1][j] || (j < m && ok[i][j+1])
			case j < m:
				match, err := path.Match(pat[i], name[j])
				ok[i][j] = err == nil && match && ok[i+1][j+1]
			}
		}
	}
	return ok[0][0]
}

// ValidatePattern checks that pattern is a relative pattern of the
// language MatchPattern matches that stays within /work.
func ValidatePattern(pattern string) error {
	switch {
	case pattern == "":
		return errors.New("empty pattern")
	case strings.HasPrefix(pattern, "/"):
		return errors.New("absolute pattern: patterns are relative to /work")
	}
	for _, el := range strings.Split(pattern, "/") {
		if el == ".." {
			return errors.New("'..' leaves /work")
		}
		if _, err := path.Match(el, ""); err != nil {
			return fmt.Errorf("malformed element %q: %v", el, err)
		}
	}
	return nil
}

// LiteralPattern reports whether pattern has no wildcard: it names one
// file.
func LiteralPattern(pattern string) bool { return !strings.ContainsAny(pattern, "*?[") }
