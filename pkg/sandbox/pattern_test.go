package sandbox

import "testing"

// TestMatchPatternDoubleStar: "**" matches any number of directories (none
// or more in front, one or more at the end); '*' stays within one element.
func TestMatchPatternDoubleStar(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"*.txt", "a.txt", true},
		{"*.txt", "d/a.txt", false},
		{"out/*", "out/a", true},
		{"out/*", "out/x/a", false},
		{"**/*.txt", "a.txt", true},
		{"**/*.txt", "x/a.txt", true},
		{"**/*.txt", "x/y/z/a.txt", true},
		{"**/*.txt", "x/y/a.csv", false},
		{"out/**", "out/a", true},
		{"out/**", "out/x/y/b", true},
		{"out/**", "out", false},
		{"out/**", "other/a", false},
		{"**", "a", true},
		{"**", "a/b/c", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"**/**/*.log", "l.log", true},
		{"**/d/*.log", "x/d/l.log", true},
		{"**/d/*.log", "x/e/l.log", false},
		{"main.py", "main.py", true},
		{"[", "[", false}, // malformed: matches nothing
	}
	for _, c := range cases {
		if got := MatchPattern(c.pattern, c.path); got != c.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
	// Many "**" cost no backtracking.
	deep := "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/b"
	if MatchPattern("**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/c", deep) {
		t.Errorf("matched a path without c")
	}
	for _, bad := range []string{"", "/etc/*", "../x", "a/../b", "a/["} {
		if ValidatePattern(bad) == nil {
			t.Errorf("ValidatePattern(%q) = nil", bad)
		}
	}
	for _, good := range []string{"*", "**/*.txt", "out/**", "a/b.txt"} {
		if err := ValidatePattern(good); err != nil {
			t.Errorf("ValidatePattern(%q) = %v", good, err)
		}
	}
}
