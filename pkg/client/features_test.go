package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

func TestExecuteStream(t *testing.T) {
	c := New(server(t))
	var events []api.Event
	var firstAt time.Time
	start := time.Now()
	res, err := c.ExecuteStream(context.Background(), &api.ExecuteRequest{Language: "python",
		Code: "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')"}, func(ev api.Event) {
		if firstAt.IsZero() {
			firstAt = time.Now()
		}
		events = append(events, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, ev := range events {
		out.WriteString(ev.Data)
	}
	if res.Stdout != "first\nsecond\n" || out.String() != res.Stdout || res.Status != executor.StatusCompleted {
		t.Fatalf("events %q result %+v", out.String(), res)
	}
	if end := time.Now(); firstAt.Sub(start) > end.Sub(start)-800*time.Millisecond {
		t.Errorf("first event %v after the start, end %v: not live", firstAt.Sub(start), end.Sub(start))
	}
	if _, err := c.ExecuteStream(context.Background(), &api.ExecuteRequest{Language: "cobol-2099", Code: "x"}, nil); !isStatus(err, 400) {
		t.Errorf("cobol-2099: %v", err)
	}
}

func TestAsyncJobs(t *testing.T) {
	c := New(server(t))
	ctx := context.Background()
	st, err := c.Submit(ctx, &api.ExecuteRequest{Language: "python", Code: "import time; time.sleep(0.5); print('done')"})
	if err != nil || st.Status != "queued" || st.ExecutionID == "" {
		t.Fatalf("submit: %+v %v", st, err)
	}
	if j, err := c.Job(ctx, st.ExecutionID, 0); err != nil || (j.Done() && j.Result.Stdout != "done\n") {
		t.Fatalf("job: %+v %v", j, err)
	}
	res, err := c.Wait(ctx, st.ExecutionID)
	if err != nil || res.Stdout != "done\n" || res.ExecutionID != st.ExecutionID {
		t.Fatalf("wait: %+v %v", res, err)
	}
	if _, err := c.Job(ctx, "exec_nosuchjob", 0); !isStatus(err, 404) {
		t.Errorf("unknown job: %v", err)
	}
}

func TestFilesAndSessions(t *testing.T) {
	c := New(server(t))
	ctx := context.Background()
	info, err := c.UploadFile(ctx, "prog.py", strings.NewReader("print('from a stored file')\n"))
	if err != nil || info.FileID == "" || info.Size != 28 {
		t.Fatalf("upload: %+v %v", info, err)
	}
	if data, err := c.FileContent(ctx, info.FileID); err != nil || string(data) != "print('from a stored file')\n" {
		t.Fatalf("content: %q %v", data, err)
	}
	data, err := c.UploadFile(ctx, "data.bin", strings.NewReader("\x00\xffdata"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Execute(ctx, &api.ExecuteRequest{Language: "python", CodeFileID: info.FileID})
	if err != nil || res.Stdout != "from a stored file\n" {
		t.Fatalf("code by file id: %+v %v", res, err)
	}
	res, err = c.Execute(ctx, &api.ExecuteRequest{Language: "python", Code: "print(open('in.bin','rb').read())",
		FileIDs: map[string]string{"in.bin": data.FileID}})
	if err != nil || res.Stdout != "b'\\x00\\xffdata'\n" {
		t.Fatalf("file by id: %+v %v", res, err)
	}
	if err := c.DeleteFile(ctx, info.FileID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FileContent(ctx, info.FileID); !isStatus(err, 404) {
		t.Errorf("deleted file: %v", err)
	}

	sess, err := c.CreateSession(ctx, &api.SessionRequest{Language: "python"})
	if err != nil || sess.SessionID == "" {
		t.Fatalf("session: %+v %v", sess, err)
	}
	if _, err := c.Execute(ctx, &api.ExecuteRequest{Language: "python", SessionID: sess.SessionID, Code: "open('k.txt','w').write('kept')"}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Execute(ctx, &api.ExecuteRequest{Language: "python", SessionID: sess.SessionID, Code: "print(open('k.txt').read())"})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("second run: %+v %v", res, err)
	}
	got, err := c.Session(ctx, sess.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range got.Files {
		found = found || f.Path == "k.txt"
	}
	if !found {
		t.Errorf("session files %+v lack k.txt", got.Files)
	}
	if err := c.DeleteSession(ctx, sess.SessionID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Session(ctx, sess.SessionID); !isStatus(err, 404) {
		t.Errorf("deleted session: %v", err)
	}
}

func isStatus(err error, code int) bool {
	e, ok := err.(*Error)
	return ok && e.StatusCode == code
}
