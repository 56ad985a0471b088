package executor

import "sync"

// LanguageStatus is one language as `sandbox-run languages` shows it: the top-level
// fields describe its default version (what a run without --version gets),
// Versions every entry of that name.
type LanguageStatus struct {
	Name      string          `json:"name"`
	Aliases   []string        `json:"aliases,omitempty"`
	Version   string          `json:"version,omitempty"`
	Compiled  bool            `json:"compiled"`
	Available bool            `json:"available"`
	Reason    string          `json:"reason,omitempty"`
	Toolchain string          `json:"toolchain,omitempty"`
	Versions  []VersionStatus `json:"versions"`
}

// VersionStatus is one entry (one toolchain) of a language.
type VersionStatus struct {
	Version   string `json:"version,omitempty"`
	Available bool   `json:"available"`
	Default   bool   `json:"default"`
	Compiled  bool   `json:"compiled"`
	Reason    string `json:"reason,omitempty"`
	Toolchain string `json:"toolchain,omitempty"`
}

// Describe lists every language with each of its entries' toolchains:
// found (version, binary) or why not. It probes the toolchains side by
// side (a version check starts the toolchain).
func (reg *Registry) Describe() []LanguageStatus {
	langs := reg.Languages()
	var wg sync.WaitGroup
	for _, l := range langs {
		wg.Add(1)
		go func() { // version checks start toolchains; do them side by side
			defer wg.Done()
			reg.Toolchain(l)
		}()
	}
	wg.Wait()
	var out []LanguageStatus
	for _, name := range reg.LanguageNames() {
		entries := reg.Entries(name)
		def, _ := reg.Lookup(name)
		info := LanguageStatus{Name: name, Versions: []VersionStatus{}}
		for _, l := range entries {
			tc := reg.Toolchain(l)
			v := VersionStatus{Version: tc.Version, Available: tc.Err == nil, Default: l == def, Compiled: l.Compiled(), Toolchain: tc.Bin}
			if tc.Err != nil {
				v.Reason = tc.Err.Error()
			}
			info.Versions = append(info.Versions, v)
			if l == def {
				info.Aliases, info.Compiled, info.Available = l.Aliases, l.Compiled(), v.Available
				info.Version, info.Reason, info.Toolchain = v.Version, v.Reason, v.Toolchain
			}
		}
		out = append(out, info)
	}
	return out
}
