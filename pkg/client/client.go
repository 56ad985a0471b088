// Package client is a Go client for the sandbox-run HTTP API (see
// pkg/api and `sandbox-run serve`): it runs code on a remote server, lists
// its languages and checks its health.
//
//	c := client.New("http://127.0.0.1:8080", client.WithAPIKey(key))
//	res, err := c.Execute(ctx, &wire.ExecuteRequest{Language: "python", Code: "print(1)"})
//
// Requests and results are pkg/wire's types: the client links nothing of
// the server and builds for every platform Go does.
//
// Answers other than 2xx are returned as *Error. Cancelling the context
// of Execute closes the connection, which makes the server kill the run.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Client talks to one sandbox-run server. It is safe for concurrent use.
type Client struct {
	baseURL string
	apiKey  string
	hc      *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sends key as "Authorization: Bearer <key>".
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithHTTPClient uses hc instead of http.DefaultClient. Executions last as
// long as their time limits: give hc no Timeout shorter than that, and
// bound calls with their context instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client for the server at baseURL, e.g.
// "http://127.0.0.1:8080" (a path prefix is kept).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	return c
}

// Error is an answer other than 2xx, or the error event that ended a
// stream (its StatusCode is then the one the same failure answers without
// streaming).
type Error struct {
	StatusCode int
	// Message is the server's "error" field, or the body's text.
	Message string
	// RetryAfter is the server's Retry-After (429 and 503); zero if none.
	RetryAfter time.Duration
	// ExecutionID names the execution when the server gave one.
	ExecutionID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("server answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// Execute runs req on the server. Its error is an *Error for answers other
// than 2xx, and otherwise a transport error (wrapping ctx.Err() when the
// context ended). It waits for the result: asynchronous jobs are not
// supported. When the sandbox could not be set up the server answers
// 500 with a result of status error_setup: Execute then returns both that
// result and an *Error.
func (c *Client) Execute(ctx context.Context, req *wire.ExecuteRequest) (*wire.Result, error) {
	body, err := encode(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/api/sandbox/execute", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode == http.StatusAccepted {
		return nil, errors.New("the server queued an asynchronous job: Execute waits for results, so send requests that are not async")
	}
	if resp.StatusCode/100 == 2 {
		var res wire.Result
		if err := json.Unmarshal(data, &res); err != nil {
			return nil, fmt.Errorf("decode result: %w", err)
		}
		return &res, nil
	}
	apiErr := newError(resp, data)
	if resp.StatusCode == http.StatusInternalServerError {
		var res wire.Result
		if json.Unmarshal(data, &res) == nil && res.Status != "" && res.ExecutionID != "" {
			apiErr.ExecutionID = res.ExecutionID
			return &res, apiErr
		}
	}
	return nil, apiErr
}

// Languages lists the languages the server can run.
func (c *Client) Languages(ctx context.Context) ([]wire.LanguageInfo, error) {
	var langs []wire.LanguageInfo
	if err := c.getJSON(ctx, "/api/sandbox/languages", &langs); err != nil {
		return nil, err
	}
	return langs, nil
}

// Health checks that the server answers (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.getJSON(ctx, "/healthz", nil)
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return newError(resp, data)
	}
	if v == nil {
		io.Copy(io.Discard, resp.Body) // let the connection be reused
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	req, err := c.newRequest(ctx, method, path, body, ct)
	if err != nil {
		return nil, err
	}
	return c.hc.Do(req)
}

// newError reads an error answer: {"error": ..., "execution_id": ...} when
// it is JSON, else the body's text, else the status text.
func newError(resp *http.Response, body []byte) *Error {
	e := &Error{StatusCode: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var er wire.ErrorResponse
	if json.Unmarshal(body, &er) == nil && er.Error != "" {
		e.Message, e.ExecutionID = er.Error, er.ExecutionID
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 512 {
		e.Message = e.Message[:512] + "..."
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date; zero if neither.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}

// IsRetryable reports whether err is an *Error the server expects to be
// retried later (429 or 503).
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusServiceUnavailable)
}
