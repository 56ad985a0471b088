package mcp

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInterpreterSessionImages: create_session with interpreter: true
// gives a live interpreter whose cells keep their variables, and a cell
// that draws a matplotlib figure answers with the figure as MCP image
// content (a PNG) after the result's JSON text; a cell without an image
// answers with the JSON alone.
func TestInterpreterSessionImages(t *testing.T) {
	if exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run() != nil {
		t.Skip("python3-matplotlib is not installed")
	}
	cs := inMemoryClient(t)

	var sess SessionOutput
	ok(t, call(t, cs, "create_session", map[string]any{"language": "python", "interpreter": true}), &sess)
	var r RunResult
	res := call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "code": "x = 41\nx + 1"})
	ok(t, res, &r)
	if r.Result["text/plain"] != "42" {
		t.Errorf("last value: %+v", r)
	}
	if len(res.Content) != 1 {
		t.Errorf("a cell without images: %d content blocks, want the JSON text alone", len(res.Content))
	}

	res = call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID,
		"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [x, 2, 3])\nx"})
	r = RunResult{}
	ok(t, res, &r)
	if r.Status != "completed" || r.Result["text/plain"] != "41" || len(r.Display) == 0 {
		t.Fatalf("figure cell: %+v", r)
	}
	var images []*sdk.ImageContent
	for _, c := range res.Content {
		if im, ok := c.(*sdk.ImageContent); ok {
			images = append(images, im)
		}
	}
	if len(images) != 1 || images[0].MIMEType != "image/png" || !bytes.HasPrefix(images[0].Data, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("want one PNG image content; got %d (%v)", len(images), res.Content)
	}
	tc, isText := res.Content[0].(*sdk.TextContent)
	var fromText RunResult
	if !isText || json.Unmarshal([]byte(tc.Text), &fromText) != nil || fromText.Result["text/plain"] != "41" {
		t.Errorf("the first block is not the result's JSON: %v", res.Content[0])
	}
}
