package judge0

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/jobs"
)

// Version is the Judge0 CE version whose API this serves, as /about and
// /version answer it: a plain version clients look up (judge0-python keys
// its language table by it).
const Version = "1.13.1"

func (s *server) about(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": Version, "homepage": "", "source_code": "",
		"maintainer": "sandbox-run (a Judge0 CE " + Version + " compatible API)"})
}

// version answers GET /version as Judge0 does: the version, plain text.
func (s *server) version(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(Version))
}

// systemInfo answers GET /system_info as Judge0 does (lscpu's and free's
// lines as an object of strings), from /proc: the architecture, the CPUs
// and their model, and the memory and swap.
func (s *server) systemInfo(w http.ResponseWriter, r *http.Request) {
	info := map[string]string{"Architecture": archName(), "CPU(s)": strconv.Itoa(runtime.NumCPU())}
	if model := procField("/proc/cpuinfo", "model name"); model != "" {
		info["Model name"] = model
	}
	for key, field := range map[string]string{"Mem": "MemTotal", "Swap": "SwapTotal"} {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", field), " kB"), 10, 64); err == nil {
			info[key] = humanBytes(kb << 10)
		}
	}
	writeJSON(w, http.StatusOK, info)
}

func archName() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(file, name string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// humanBytes is n as free -h shows it (23Gi, 512Mi).
func humanBytes(n int64) string {
	v, unit := float64(n), "B"
	for _, u := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if v < 10 && unit != "B" {
		return strconv.FormatFloat(v, 'f', 1, 64) + unit
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + unit
}

// workers answers GET /workers as Judge0 does (one entry per queue): this
// server's run slots, busy and idle, and the runs waiting for one.
func (s *server) workers(w http.ResponseWriter, r *http.Request) {
	total, busy := s.svc.Workers(), s.svc.InFlight()
	paused := 0
	if s.svc.Draining() {
		paused = total
	}
	writeJSON(w, http.StatusOK, []map[string]any{{"queue": Version, "size": s.svc.Queued(), "available": total,
		"idle": max(total-busy, 0), "working": busy, "paused": paused, "failed": 0}})
}

// stats counts what /statistics answers: the submissions this node took
// since it started (by day, for 30 days, and by language) and the verdicts
// it saw (each submission once, the last statsSeen of them remembered).
type stats struct {
	mu        sync.Mutex
	total     int
	days      map[string]int // "2006-01-02" → submissions
	languages map[int]int
	statuses  map[int]int
	seen      map[string]bool
	order     []string
}

const statsSeen = 1 << 16

func (st *stats) created(langID int, at time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.days == nil {
		st.days, st.languages, st.statuses, st.seen = map[string]int{}, map[int]int{}, map[int]int{}, map[string]bool{}
	}
	st.total++
	st.days[at.UTC().Format(time.DateOnly)]++
	st.languages[langID]++
	cutoff := at.UTC().AddDate(0, 0, -31).Format(time.DateOnly)
	for d := range st.days {
		if d < cutoff {
			delete(st.days, d)
		}
	}
}

// finished counts a submission's verdict the first time it is seen.
func (st *stats) finished(token string, statusID int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.seen == nil || st.seen[token] {
		return // not taken here since start (nil), or counted
	}
	st.seen[token] = true
	st.order = append(st.order, token)
	if len(st.order) > statsSeen {
		delete(st.seen, st.order[0])
		st.order = st.order[1:]
	}
	st.statuses[statusID]++
}

// statistics answers GET /statistics in Judge0's shape: submissions in all,
// today and on each of the last 30 days, by language and by status (most
// first), and the size of the job store. The counts are this node's since
// it started (Judge0 counts its database).
func (s *server) statistics(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UTC()
	st := &s.stats
	st.mu.Lock()
	today := now.Format(time.DateOnly)
	last30 := map[string]int{}
	for i := 1; i <= 30; i++ {
		d := now.AddDate(0, 0, -i).Format(time.DateOnly)
		last30[d] = st.days[d]
	}
	var langs, stats []map[string]any
	for id, n := range st.languages {
		name := strconv.Itoa(id)
		if l, ok := byID(id); ok {
			v, _ := s.resolve(l)
			name = nameOf(l, v)
		}
		langs = append(langs, map[string]any{"language": map[string]any{"id": id, "name": name}, "count": n})
	}
	for id, n := range st.statuses {
		stats = append(stats, map[string]any{"status": map[string]any{"id": id, "name": status(id).Description}, "count": n})
	}
	total, todays := st.total, st.days[today]
	st.mu.Unlock()
	byCount := func(list []map[string]any) []map[string]any {
		sort.SliceStable(list, func(i, j int) bool { return list[i]["count"].(int) > list[j]["count"].(int) })
		return append([]map[string]any{}, list...)
	}
	var size int64
	if fi, err := os.Stat(jobs.StorePath(s.cfg.DataDir)); err == nil {
		size = fi.Size()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"created_at": judge0Time(now), "cached_until": judge0Time(now),
		"submissions": map[string]any{"total": total, "today": todays, "last_30_days": last30},
		"languages":   byCount(langs), "statuses": byCount(stats),
		"database": map[string]any{"size_pretty": fmt.Sprintf("%d kB", size>>10), "size_in_bytes": size},
	})
}

// judge0Time is a time as Judge0 (Rails) writes it: UTC, milliseconds, Z.
// judge0-python parses it with "%Y-%m-%dT%H:%M:%S.%fZ", which takes at
// most six fractional digits.
func judge0Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
