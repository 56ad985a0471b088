package gvisor

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// reads counts the reads made of a reader.
type reads struct {
	r io.Reader
	n int
}

func (c *reads) Read(p []byte) (int, error) { c.n++; return c.r.Read(p) }

// TestFrame: the shim reads its header in two reads, whatever its size,
// and leaves the rest of its stdin, the program's, unread.
func TestFrame(t *testing.T) {
	h := header{Args: []string{"/usr/bin/bash", "main.sh"}, Env: []string{"PATH=/usr/bin", "HOME=/work", "X=" + strings.Repeat("y", 300)}, Dir: "/work", Result: true}
	in := &reads{r: io.MultiReader(bytes.NewReader(frame(h)), strings.NewReader("the program's stdin"))}
	got, err := readHeader(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Args, h.Args) || !slices.Equal(got.Env, h.Env) || got.Dir != h.Dir || !got.Result {
		t.Errorf("read %+v, framed %+v", got, h)
	}
	if in.n != 2 {
		t.Errorf("the header took %d reads, want 2", in.n)
	}
	if rest, _ := io.ReadAll(in); string(rest) != "the program's stdin" {
		t.Errorf("left %q of stdin, want the program's whole stdin", rest)
	}

	for _, bad := range []string{"", "0000", "zzzzzzzz{}", "ffffffff{}", "00000002{}", "0000000b{\"args\":[]}"} {
		if _, err := readHeader(strings.NewReader(bad)); err == nil {
			t.Errorf("readHeader(%q) took it", bad)
		}
	}
}
