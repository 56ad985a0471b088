package executor

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseLanguages: any document either fails to parse or yields entries
// that pass the checks a registry relies on.
func FuzzParseLanguages(f *testing.F) {
	f.Add(defaultLanguages)
	f.Add([]byte("languages:\n  - name: x\n    source: a\n    toolchain: [b]\n    run: [c]\n"))
	f.Add([]byte("languages: [{name: j, source: '{main}.java', main_name: {regex: '(x', default: M}, toolchain: [t], run: [r]}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		langs, err := ParseLanguages(data)
		if err != nil {
			return
		}
		names := map[string]string{} // name or alias → the language's name
		for _, l := range langs {
			if l.Name == "" || l.Source == "" || len(l.Toolchain) == 0 || len(l.Run) == 0 {
				t.Fatalf("accepted an incomplete entry %+v", l)
			}
			if l.Compiled() && len(l.Artifacts) == 0 {
				t.Fatalf("accepted a compile step without artifacts: %+v", l)
			}
			// Entries may share a name (the versions of a language), but a
			// name or alias never names two languages.
			for _, n := range append([]string{l.Name}, l.Aliases...) {
				n = strings.ToLower(n)
				if other, ok := names[n]; ok && other != l.Name {
					t.Fatalf("accepted %q for both %s and %s", n, other, l.Name)
				}
				names[n] = l.Name
			}
			l.mainName([]byte("public class Foo {}")) // must not panic
		}
	})
}

// FuzzFileData: what FileData accepts round-trips through its own JSON.
func FuzzFileData(f *testing.F) {
	for _, s := range []string{`"text"`, `{"content":"aGk=","encoding":"base64"}`, `{"content":"x"}`, `{"content":"x","encoding":"rot13"}`, `null`, `{"content":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d FileData
		if json.Unmarshal(data, &d) != nil {
			return
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal %q: %v", d, err)
		}
		var back FileData
		if err := json.Unmarshal(b, &back); err != nil || string(back) != string(d) {
			t.Fatalf("%q → %s → %q, %v", d, b, back, err)
		}
	})
}
