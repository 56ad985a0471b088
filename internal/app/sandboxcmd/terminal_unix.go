//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sandboxcmd

import "golang.org/x/sys/unix"

// terminalSize is the size of the terminal fd, or 0 and 0.
func terminalSize(fd int) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}

// makeRaw puts the terminal fd in raw mode, as cfmakeraw(3) does: no
// echo, no line editing, no signals from keys, bytes as they are typed,
// output as it is written. restore undoes it.
func makeRaw(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, getTermios)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, setTermios, &t); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, setTermios, old) }, nil
}
