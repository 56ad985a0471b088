package client

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// ExecuteStream runs req with Server-Sent Events: onEvent gets each
// compile, stdout and stderr chunk as the program produces it, and the
// result comes back at the end as from Execute.
func (c *Client) ExecuteStream(ctx context.Context, req *wire.ExecuteRequest, onEvent func(wire.Event)) (*wire.Result, error) {
	body, err := encode(req)
	if err != nil {
		return nil, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, "/api/sandbox/execute", body, "application/json")
	if err != nil {
		return nil, err
	}
	st, err := c.openSSE(hreq)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for {
		name, data, ok := st.next()
		if !ok {
			break
		}
		switch name {
		case "result":
			var res wire.Result
			if err := json.Unmarshal(data, &res); err != nil {
				return nil, fmt.Errorf("decode result: %w", err)
			}
			return &res, nil
		case "error":
			return nil, streamError(data)
		default:
			var ev wire.Event
			if err := json.Unmarshal(data, &ev); err == nil && onEvent != nil {
				onEvent(ev)
			}
		}
	}
	if err := st.sc.Err(); err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return nil, errors.New("the event stream ended without a result")
}

// sseStream is a response of Server-Sent Events being read.
type sseStream struct {
	io.Closer
	sc   *bufio.Scanner
	name string // the event's, until its end
}

// openSSE sends hreq asking for Server-Sent Events: their stream, once
// the server answers with one, else the server's answer as an *Error.
func (c *Client) openSSE(hreq *http.Request) (*sseStream, error) {
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, newError(resp, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20) // a result event carries all output
	return &sseStream{Closer: resp.Body, sc: sc}, nil
}

// next is the next event: its name and its data line; false at the end of
// the stream (sc.Err says whether it failed).
func (s *sseStream) next() (name string, data []byte, ok bool) {
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			s.name = ""
		case strings.HasPrefix(line, "event:"):
			s.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			return s.name, []byte(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")), true
		}
	}
	return "", nil, false
}

// streamError is the "error" event that ends a stream as an *Error, of the
// status it gives (200 when it gives none).
func streamError(data []byte) error {
	e := wire.StreamError{Status: http.StatusOK}
	json.Unmarshal(data, &e)
	return &Error{StatusCode: cmp.Or(e.Status, http.StatusOK), Message: e.Error, ExecutionID: e.ExecutionID}
}

// Job is the state of an asynchronous execution: Status while it is queued
// or running, Result once it is done.
type Job struct {
	Status *wire.JobStatus
	Result *wire.Result
}

// Done reports whether the job has its result.
func (j *Job) Done() bool { return j.Result != nil }

// Submit queues req as an asynchronous execution (POST
// /api/sandbox/executions) and returns at once.
func (c *Client) Submit(ctx context.Context, req *wire.ExecuteRequest) (*wire.JobStatus, error) {
	var st wire.JobStatus
	if err := c.call(ctx, http.MethodPost, "/api/sandbox/executions", req, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Job returns an asynchronous execution's state; with wait > 0 the server
// holds the call until the job is done or wait has passed.
func (c *Client) Job(ctx context.Context, id string, wait time.Duration) (*Job, error) {
	path := "/api/sandbox/executions/" + url.PathEscape(id)
	if wait > 0 {
		path += "?wait=true&timeout=" + strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)
	}
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodGet, path, nil, &raw); err != nil {
		return nil, err
	}
	var probe struct {
		Status string `json:"status"`
	}
	json.Unmarshal(raw, &probe)
	if probe.Status == "queued" || probe.Status == "running" {
		var st wire.JobStatus
		if err := json.Unmarshal(raw, &st); err != nil {
			return nil, err
		}
		return &Job{Status: &st}, nil
	}
	var res wire.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &Job{Result: &res}, nil
}

// Wait polls an asynchronous execution until it is done or ctx ends.
func (c *Client) Wait(ctx context.Context, id string) (*wire.Result, error) {
	for {
		j, err := c.Job(ctx, id, 30*time.Second)
		if err != nil {
			return nil, err
		}
		if j.Done() {
			return j.Result, nil
		}
	}
}

// UploadFile stores content on the server (POST /api/sandbox/files); use
// the returned id as {"file_id": id} in executions.
func (c *Client) UploadFile(ctx context.Context, name string, content io.Reader) (*wire.FileInfo, error) {
	path := "/api/sandbox/files"
	if name != "" {
		path += "?name=" + url.QueryEscape(name)
	}
	req, err := c.newRequest(ctx, http.MethodPost, path, content, "application/octet-stream")
	if err != nil {
		return nil, err
	}
	var info wire.FileInfo
	if err := c.send(req, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// FileContent downloads a stored file.
func (c *Client) FileContent(ctx context.Context, id string) ([]byte, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/api/sandbox/files/"+url.PathEscape(id)+"/content", nil, "")
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, newError(resp, data)
	}
	return data, err
}

// DeleteFile removes a stored file.
func (c *Client) DeleteFile(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/sandbox/files/"+url.PathEscape(id), nil, nil)
}

// CreateSession starts a session whose executions share /work.
func (c *Client) CreateSession(ctx context.Context, req *wire.SessionRequest) (*wire.SessionInfo, error) {
	var info wire.SessionInfo
	if err := c.call(ctx, http.MethodPost, "/api/sandbox/sessions", req, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Session returns a session with the files in its /work.
func (c *Client) Session(ctx context.Context, id string) (*wire.SessionInfo, error) {
	var info wire.SessionInfo
	if err := c.call(ctx, http.MethodGet, "/api/sandbox/sessions/"+url.PathEscape(id), nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeleteSession ends a session and removes its files.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/api/sandbox/sessions/"+url.PathEscape(id), nil, nil)
}

// call sends in (JSON, if not nil) and decodes a 2xx answer into out (if
// not nil); other answers are *Error.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := encode(in)
		if err != nil {
			return err
		}
		body, ct = b, "application/json"
	}
	req, err := c.newRequest(ctx, method, path, body, ct)
	if err != nil {
		return err
	}
	return c.send(req, out)
}

func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return newError(resp, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode %s: %w", req.URL.Path, err)
		}
	}
	return nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sandbox-run-client")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

func encode(v any) (*bytes.Buffer, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return &body, nil
}

// PutSecret stores the key's secret name: a run naming it
// (wire.ExecuteRequest.Secrets) sees a placeholder, and the server's
// egress sends the value in its place to the secret's hosts only. The
// answer never holds the value.
func (c *Client) PutSecret(ctx context.Context, name string, s wire.SecretPut) (*wire.Secret, error) {
	var out wire.Secret
	if err := c.call(ctx, http.MethodPut, "/api/sandbox/secrets/"+url.PathEscape(name), s, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSecrets lists the key's secrets: names, hosts and headers, never
// values.
func (c *Client) ListSecrets(ctx context.Context) ([]wire.Secret, error) {
	var out wire.SecretList
	if err := c.call(ctx, http.MethodGet, "/api/sandbox/secrets", nil, &out); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}

// DeleteSecret deletes one of the key's secrets.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, "/api/sandbox/secrets/"+url.PathEscape(name), nil, nil)
}
