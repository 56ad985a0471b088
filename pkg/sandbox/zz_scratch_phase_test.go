package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"
)

func TestScratchPhases(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	e := testEngine(t)
	spec := func() *Spec {
		return &Spec{Args: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Mounts: SystemMounts}
	}
	for _, pause := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		var start, toStarted, prog, wait, total []time.Duration
		for i := 0; i < 60; i++ {
			time.Sleep(pause)
			t0 := time.Now()
			p, err := e.Start(context.Background(), spec())
			if err != nil {
				t.Fatal(err)
			}
			t1 := time.Now()
			ev := <-p.events
			if ev.Event != "started" {
				t.Fatal(ev)
			}
			t2 := time.Now()
			<-p.exited
			t3 := time.Now()
			p.Wait()
			t4 := time.Now()
			start = append(start, t1.Sub(t0))
			toStarted = append(toStarted, t2.Sub(t1))
			prog = append(prog, t3.Sub(t2))
			wait = append(wait, t4.Sub(t3))
			total = append(total, t4.Sub(t0))
		}
		med := func(d []time.Duration) string {
			s := append([]time.Duration(nil), d[10:]...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			return fmt.Sprintf("%6.2f", float64(s[len(s)/2])/1e6)
		}
		t.Logf("pause=%v  Start=%s init-setup=%s prog=%s teardown=%s total=%s", pause, med(start), med(toStarted), med(prog), med(wait), med(total))
	}
	// primitives
	info := e.Cgroups()
	for _, pause := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		var cr, jn, rm []time.Duration
		for i := 0; i < 40; i++ {
			cmd := exec.Command("/bin/sleep", "10")
			cmd.Start()
			time.Sleep(pause)
			t0 := time.Now()
			rc, err := e.cg.create(fmt.Sprintf("scratch-%d", i), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			t1 := time.Now()
			if err := rc.join(cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			t2 := time.Now()
			cmd.Process.Kill()
			cmd.Wait()
			t3 := time.Now()
			rc.remove()
			t4 := time.Now()
			cr = append(cr, t1.Sub(t0))
			jn = append(jn, t2.Sub(t1))
			rm = append(rm, t4.Sub(t3))
		}
		med := func(d []time.Duration) string {
			s := append([]time.Duration(nil), d[5:]...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			return fmt.Sprintf("%6.2f", float64(s[len(s)/2])/1e6)
		}
		t.Logf("cgroup v%d pause=%v create=%s join=%s remove=%s", info.Version, pause, med(cr), med(jn), med(rm))
	}
}

func TestScratchOne(t *testing.T) {
	if os.Getenv("SCRATCH1") == "" {
		t.Skip()
	}
	e := testEngine(t)
	mk, _ := os.OpenFile("/sys/kernel/tracing/trace_marker", os.O_WRONLY, 0)
	pause, _ := time.ParseDuration(os.Getenv("PAUSE"))
	for i := 0; i < 12; i++ {
		time.Sleep(pause)
		fmt.Fprintf(mk, "RUN-START %d\n", i)
		_, err := e.Run(context.Background(), &Spec{Args: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Mounts: SystemMounts})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(mk, "RUN-END %d\n", i)
	}
}
