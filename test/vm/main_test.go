package main

import (
	"slices"
	"testing"
)

// The driver's checks run only inside the VM (scripts/vm-check.sh); these
// test the parsing they rely on.

func TestParseMetrics(t *testing.T) {
	ms := parseMetrics(`# HELP sandbox_run_executions_total Executions finished, by language and status.
# TYPE sandbox_run_executions_total counter
sandbox_run_executions_total{language="c",status="completed"} 2
sandbox_run_executions_in_flight 0
sandbox_run_execution_duration_seconds_bucket{language="c",le="+Inf"} 2
`)
	if len(ms) != 3 {
		t.Fatalf("got %d samples, want 3: %+v", len(ms), ms)
	}
	if m := ms[0]; m.name != "sandbox_run_executions_total" || m.labels["language"] != "c" || m.labels["status"] != "completed" || m.value != 2 {
		t.Errorf("first sample: %+v", m)
	}
	if m := ms[1]; m.name != "sandbox_run_executions_in_flight" || len(m.labels) != 0 || m.value != 0 {
		t.Errorf("second sample: %+v", m)
	}
	if m := ms[2]; m.labels["le"] != "+Inf" {
		t.Errorf("third sample: %+v", m)
	}
}

func TestHierarchies(t *testing.T) {
	all := []mount{
		{root: "/", point: "/sys/fs/cgroup", fstype: "tmpfs", options: "rw"},
		{root: "/", point: "/sys/fs/cgroup/cpu,cpuacct", fstype: "cgroup", options: "rw,cpu,cpuacct"},
		{root: "/", point: "/sys/fs/cgroup/memory", fstype: "cgroup", options: "rw,memory"},
		{root: "/", point: "/sys/fs/cgroup/systemd", fstype: "cgroup", options: "rw,xattr,name=systemd"},
		{root: "/", point: "/sys/fs/cgroup/unified", fstype: "cgroup2", options: "rw,nsdelegate"},
	}
	for _, c := range []struct {
		key  string
		want string
	}{
		{"cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct"},
		{"memory", "/sys/fs/cgroup/memory"},
		{"name=systemd", "/sys/fs/cgroup/systemd"},
		{"", "/sys/fs/cgroup/unified"},
		{"pids", ""},
	} {
		got := ""
		for _, m := range all {
			if matches(m, c.key) {
				got = m.point
				break
			}
		}
		if got != c.want {
			t.Errorf("hierarchy of %q: got %q, want %q", c.key, got, c.want)
		}
	}
	m := mountOf(all, "/sys/fs/cgroup/cpu,cpuacct/a/sandbox-run")
	if m.point != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Errorf("mountOf: %+v", m)
	}
	if got := controllersOf(m); !slices.Equal(got, []string{"cpu", "cpuacct"}) {
		t.Errorf("controllersOf(cpu,cpuacct) = %v", got)
	}
	if got := controllersOf(all[4]); !slices.Equal(got, []string{"unified"}) {
		t.Errorf("controllersOf(cgroup2) = %v", got)
	}
}
