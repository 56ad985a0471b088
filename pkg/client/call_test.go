package client

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

func TestCall(t *testing.T) {
	c := New(server(t))
	code := "class Calc:\n    def add(self, a, b):\n        return {'sum': a + b}\n    def boom(self):\n        raise KeyError('k')\n"
	var out struct{ Sum int }
	res, err := c.Call(context.Background(), &api.ExecuteRequest{Language: "python", Code: code, TimeoutAuto: true,
		Entrypoint: &executor.Entrypoint{ClassName: "Calc", MethodName: "add", MethodParams: json.RawMessage(`{"a": 40, "b": 2}`)}}, &out)
	if err != nil || out.Sum != 42 || res.AutoTimeoutSeconds <= 0 {
		t.Fatalf("add: %v %+v %+v", err, out, res)
	}
	_, err = c.Call(context.Background(), &api.ExecuteRequest{Language: "python", Code: code,
		Entrypoint: &executor.Entrypoint{ClassName: "Calc", MethodName: "boom"}}, nil)
	var ce *CallError
	if !errors.As(err, &ce) || ce.Exception == nil || ce.Exception.Type != "KeyError" || ce.Result.Status != executor.StatusRuntimeError {
		t.Fatalf("boom: %v", err)
	}
	_, err = c.Call(context.Background(), &api.ExecuteRequest{Language: "bash", Code: "f() { :; }",
		Entrypoint: &executor.Entrypoint{Function: "f"}}, nil)
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("bash: %v", err)
	}
}
