package secretcmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// errInterrupted is a value's prompt cut short by SIGINT or SIGTERM.
var errInterrupted = errors.New("interrupted")

// readValue reads secret name's value: from the file fromFile, else from
// standard input ("" or "-"), asked for without echo when that is a
// terminal. One trailing newline (LF or CRLF) is dropped; an empty value,
// one of several lines, or one that is no UTF-8 text is refused. The
// value is never part of a message. code is non-zero when it fails.
func (m *cmd) readValue(name, fromFile string) (value string, code int) {
	var data []byte
	var err error
	from := "standard input"
	switch {
	case fromFile != "" && fromFile != "-":
		from = fromFile
		f, oerr := os.Open(fromFile)
		if oerr != nil {
			return "", m.fatalf(exitFailed, "--from-file: %v", oerr)
		}
		defer f.Close()
		data, err = readBounded(f)
	case cli.IsTerminal(os.Stdin):
		data, err = m.askValue(name)
	default:
		data, err = readBounded(os.Stdin)
	}
	switch {
	case errors.Is(err, errInterrupted):
		return "", m.fatalf(exitInterrupted, "interrupted")
	case err != nil:
		return "", m.fatalf(exitFailed, "the value of %s: %s: %v", name, from, err)
	}
	value = strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	switch {
	case len(value) > secrets.MaxValue:
		return "", m.fatalf(exitUsage, "the value of %s (%s) is longer than %d bytes, a secret's most", name, from, secrets.MaxValue)
	case value == "":
		return "", m.fatalf(exitUsage, "the value of %s is empty: it is read from %s (printf %%s \"$VALUE\" | sandbox-run secrets put %s --host ...)", name, from, name)
	case strings.ContainsAny(value, "\r\n"):
		return "", m.fatalf(exitUsage, "the value of %s (%s) has more than one line: give one value (a trailing newline is dropped)", name, from)
	case strings.ContainsRune(value, 0):
		return "", m.fatalf(exitUsage, "the value of %s (%s) holds a NUL byte", name, from)
	case !utf8.ValidString(value):
		return "", m.fatalf(exitUsage, "the value of %s (%s) is not UTF-8 text", name, from)
	}
	return value, 0
}

// readBounded reads r to its end, or past the longest value there may be
// with its newline: the caller tells that by the length.
func readBounded(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, secrets.MaxValue+3))
}

// askValue asks for secret name's value on the terminal that is standard
// input, with echo off while it is typed (restored before it returns, at
// SIGINT or SIGTERM too), and reads one line.
func (m *cmd) askValue(name string) ([]byte, error) {
	fd := int(os.Stdin.Fd())
	restore, err := noEcho(fd)
	if err != nil {
		return nil, fmt.Errorf("standard input is a terminal whose echo cannot be turned off (%v): pipe the value in, or give --from-file", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	fmt.Fprintf(m.con.Stderr(), "Value of secret %s (not shown; Enter ends it): ", name)
	type line struct {
		b   []byte
		err error
	}
	got := make(chan line, 1)
	go func() {
		b, err := bufio.NewReader(io.LimitReader(os.Stdin, secrets.MaxValue+3)).ReadBytes('\n')
		if err == io.EOF && len(b) > 0 {
			err = nil
		}
		got <- line{b, err}
	}()
	var l line
	select {
	case l = <-got:
	case <-sig:
		l.err = errInterrupted
	}
	restore()
	fmt.Fprintln(m.con.Stderr())
	if l.err == io.EOF {
		return nil, nil // nothing typed: refused as empty
	}
	return l.b, l.err
}
