package agent

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal of size s: its master, which the
// agent reads and writes (non-blocking, so its reads can be given a
// deadline and closed under a reader), and its slave, /dev/pts/N, the
// process's terminal.
func openPTY(s Size) (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: "/dev/ptmx", Err: err}
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	var n uint32
	if err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err == nil {
		n, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	}
	if err == nil {
		err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, winsize(s))
	}
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("a pseudo-terminal: %w", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return master, os.NewFile(uintptr(sfd), name), nil
}

// setSize sets the size of the terminal of master.
func setSize(master *os.File, s Size) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	// Not master.Fd(), which would make the master blocking.
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, winsize(s))
	}); cerr != nil {
		return cerr
	}
	return err
}

func winsize(s Size) *unix.Winsize {
	return &unix.Winsize{Row: s.Rows, Col: s.Cols}
}
