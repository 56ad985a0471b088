package sandbox

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzValidatePath checks what an accepted input file name promises: it is
// relative and local, valid UTF-8 without control characters, is at most
// 255 bytes, nests at most 16 directories, and its cleaned form is clean,
// local and accepted as itself.
func FuzzValidatePath(f *testing.F) {
	for _, seed := range []string{
		"a", "data.txt", "in/data.bin", "a/./b//c/", "./a", "a/..", "a/../b", "a/../../b",
		"..", "../x", ".", "./", "/abs", "//x", "", "a\x00b", "a\nb", "\x7f", "tab\there",
		"\u0085", "é/ü.txt", "\xff\xfe", "a\\..\\..\\b", "...", ".../x", "~/x", " ",
		strings.Repeat("a", 255), strings.Repeat("a", 256), strings.Repeat("a/", 16) + "x", strings.Repeat("a/", 15) + "x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := ValidatePath(p)
		if err != nil {
			if clean != "" {
				t.Fatalf("ValidatePath(%q) failed (%v) but returned %q", p, err, clean)
			}
			return
		}
		switch {
		case len(p) > 255:
			t.Fatalf("accepted %d bytes", len(p))
		case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || path.IsAbs(clean):
			t.Fatalf("accepted absolute %q", p)
		case !filepath.IsLocal(p) || !filepath.IsLocal(clean):
			t.Fatalf("accepted non-local %q (clean %q)", p, clean)
		case !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0:
			t.Fatalf("accepted control character in %q", p)
		case clean != path.Clean(p) || clean != path.Clean(clean):
			t.Fatalf("cleaned %q to %q, not path.Clean", p, clean)
		case clean == "." || clean == ".." || strings.HasPrefix(clean, "../"):
			t.Fatalf("accepted %q leaving /work (clean %q)", p, clean)
		case strings.Count(clean, "/") >= 16:
			t.Fatalf("accepted %q nested %d deep", p, strings.Count(clean, "/"))
		}
		again, err := ValidatePath(clean)
		if err != nil || again != clean {
			t.Fatalf("not idempotent: %q → %q → %q, %v", p, clean, again, err)
		}
	})
}
