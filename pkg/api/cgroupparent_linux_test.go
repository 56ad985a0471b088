package api

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestCgroupParentConfig: cgroup_parent (YAML, or SANDBOX_RUN_CGROUP_PARENT
// over it) reaches the engine NewExecutor builds: its sandboxes' cgroups
// are made under that cgroup, not the server's own.
func TestCgroupParentConfig(t *testing.T) {
	var fromFile Config
	if err := yaml.Unmarshal([]byte("cgroup_parent: /sys/fs/cgroup/sandboxes.slice\n"), &fromFile); err != nil || fromFile.CgroupParent != "/sys/fs/cgroup/sandboxes.slice" {
		t.Fatalf("cgroup_parent from YAML: %q, %v", fromFile.CgroupParent, err)
	}
	name := fmt.Sprintf("sandbox-run-apitest-%d", os.Getpid())
	cfg, err := LoadConfig("", envOf(map[string]string{"SANDBOX_RUN_CGROUP_PARENT": name, "SANDBOX_RUN_DATA_DIR": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CgroupParent != name {
		t.Fatalf("CgroupParent %q, want %q", cfg.CgroupParent, name)
	}
	cfg.PoolSize = -1
	x, err := NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	parents := x.Engine().Cgroups().Parents
	t.Cleanup(func() {
		x.Engine().Close()
		for _, p := range parents {
			os.Remove(p)
			os.Remove(filepath.Dir(p))
		}
	})
	for ctrl, p := range parents {
		if !strings.HasSuffix(p, "/"+name+"/sandbox-run") {
			t.Errorf("%s: sandboxes' cgroups under %s, want under %s", ctrl, p, name)
		}
	}
}
