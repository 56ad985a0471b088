package sandboxcmd

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
)

const cpUsage = `Usage: sandbox-run sandbox cp SRC DST

Copies a file into or out of a live sandbox, byte for byte. One side is
ID:PATH, a file in sandbox ID (PATH relative to /work unless absolute); the
other is a local file, or - for standard input (to upload) or standard output
(to download):

  sandbox-run sandbox cp data.csv ID:in/data.csv    upload (directories are made)
  tar c src | sandbox-run sandbox cp - ID:src.tar   upload standard input
  sandbox-run sandbox cp ID:out/report.txt .        download into a directory
  sandbox-run sandbox cp ID:f.txt -                 download to standard output

A PATH that ends in / or names a directory gets SRC's file name, as does a
local DST that is a directory. An upload is at most 64 MiB (the server's
bound). With --output-format json an upload prints the file as the sandbox
has it (path, size, mode, mod_time).

Flags:
`

// remoteFile reads ID:PATH; a local path has no ':' before its first
// slash (write ./a:b for a local file named so).
func remoteFile(s string) (id, p string, ok bool) {
	i := strings.Index(s, ":")
	if i <= 0 || strings.ContainsAny(s[:i], `/\`) {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func (m *cmd) copy(args []string) int {
	fs := m.flags("cp", cpUsage, true)
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) != 2 {
		return m.fatalf(exitUsage, "sandbox cp wants SRC and DST, one of them ID:PATH, got %q", words)
	}
	src, dst := words[0], words[1]
	srcID, srcPath, srcRemote := remoteFile(src)
	dstID, dstPath, dstRemote := remoteFile(dst)
	switch {
	case srcRemote && dstRemote:
		return m.fatalf(exitUsage, "sandbox cp copies between a sandbox and here: both %s and %s are in a sandbox (use sandbox exec ID -- cp A B)", src, dst)
	case !srcRemote && !dstRemote:
		return m.fatalf(exitUsage, "sandbox cp wants one side as ID:PATH (a file in sandbox ID), got %s and %s", src, dst)
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	if dstRemote {
		return m.upload(src, dstID, dstPath)
	}
	return m.download(srcID, srcPath, dst)
}

// upload copies the local file src (- for stdin) to id:p.
func (m *cmd) upload(src, id, p string) int {
	in := io.Reader(os.Stdin)
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return m.fatalf(exitFailed, "%v", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return m.fatalf(exitFailed, "%s is a directory: sandbox cp copies one file (send a tar archive: tar c DIR | sandbox-run sandbox cp - ID:DIR.tar)", src)
		}
		in = f
	}
	intoDir := p == "" || strings.HasSuffix(p, "/")
	if !intoDir {
		if e, err := m.c.StatFile(m.ctx, id, p); err == nil && e.Type == "dir" {
			intoDir = true
		}
	}
	if intoDir {
		if src == "-" {
			return m.fatalf(exitUsage, "%s:%s is a directory: give the file's path in it to copy standard input there", id, p)
		}
		p = path.Join(p, filepath.Base(src))
	}
	e, err := m.c.WriteFile(m.ctx, id, p, in)
	if err != nil {
		return m.fileFailure(id, p, err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(e)
	}
	return 0
}

// download copies id:p to the local file dst (- for stdout).
func (m *cmd) download(id, p, dst string) int {
	if p == "" {
		return m.fatalf(exitUsage, "give the file to copy from sandbox %s as %s:PATH", id, id)
	}
	if dst != "-" {
		if st, err := os.Stat(dst); err == nil && st.IsDir() {
			dst = filepath.Join(dst, path.Base(p))
		}
	}
	rc, err := m.c.ReadFile(m.ctx, id, p)
	if err != nil {
		return m.fileFailure(id, p, err)
	}
	defer rc.Close()
	if dst == "-" {
		if _, err := io.Copy(os.Stdout, rc); err != nil {
			return m.fatalf(exitFailed, "%s:%s: %v", id, p, err)
		}
		return 0
	}
	f, err := os.Create(dst)
	if err != nil {
		return m.fatalf(exitFailed, "%v", err)
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst) // not half a file
		return m.fatalf(exitFailed, "%s:%s to %s: %v", id, p, dst, err)
	}
	return 0
}

// fileFailure reports a file call that failed: a sandbox that does not
// exist, or the file's own trouble (exit 1), else as failure.
func (m *cmd) fileFailure(id, p string, err error) int {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return m.failure(id, err)
	}
	switch ae.StatusCode {
	case http.StatusNotFound:
		if _, gerr := m.c.GetSandbox(m.ctx, id); client.IsNotFound(gerr) {
			return m.fatalf(exitFailed, "no such sandbox %s", id)
		}
		fallthrough
	case http.StatusBadRequest, http.StatusForbidden, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusInsufficientStorage:
		return m.fatalf(exitFailed, "%s:%s: %s", id, p, ae.Message)
	}
	return m.failure(id, err)
}
