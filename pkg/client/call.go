package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// CallError is an entry point call that did not return: the exception it
// raised (or why its value could not be serialized), or the run's end.
type CallError struct {
	Result    *wire.Result
	Exception *wire.Exception // nil when the run ended otherwise (timeout, limit)
}

func (e *CallError) Error() string {
	if e.Exception != nil {
		return e.Exception.Type + ": " + e.Exception.Message
	}
	msg := e.Result.Error
	if msg == "" {
		msg = "no return value"
	}
	return fmt.Sprintf("call %s: %s", e.Result.Status, msg)
}

// Call runs req, which must have an Entrypoint, and decodes the return
// value into out (when not nil). A call that raised or did not return is a
// *CallError, with the result.
func (c *Client) Call(ctx context.Context, req *wire.ExecuteRequest, out any) (*wire.Result, error) {
	if req.Entrypoint == nil {
		return nil, errors.New("Call needs an ExecuteRequest with an Entrypoint")
	}
	res, err := c.Execute(ctx, req)
	if err != nil {
		return res, err
	}
	if res.ReturnValue == nil {
		return res, &CallError{Result: res, Exception: res.Exception}
	}
	if out != nil {
		if err := json.Unmarshal(res.ReturnValue, out); err != nil {
			return res, fmt.Errorf("decode return value: %w", err)
		}
	}
	return res, nil
}
