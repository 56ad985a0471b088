package api

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkExecuteBashTrue posts bash `true` to a server on 127.0.0.1
// from four clients at once, as ../shared/acceptance/perf does: with
// -cpuprofile it shows where the server's own CPU of a run goes (the
// sandboxes' PID 1s and programs are processes of their own).
//
//	go test -run '^$' -bench ExecuteBashTrue -benchtime 3000x -cpuprofile cpu.out ./pkg/api
func BenchmarkExecuteBashTrue(b *testing.B) {
	ts := startServer(b, testConfig())
	body := []byte(`{"language":"bash","code":"true"}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	b.SetParallelism(2) // 2 per CPU: 4 clients here
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(ts.url+"/api/sandbox/execute", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"status":"completed"`)) && !bytes.Contains(data, []byte(`"status": "completed"`)) {
				b.Errorf("%d %s", resp.StatusCode, data)
				return
			}
		}
	})
}
