package repl

import (
	"os"

	"golang.org/x/sys/unix"
)

func init() { ctrlCAsInput = ctrlCAsInputLinux }

// ctrlCAsInputLinux: Ctrl-C on a terminal sends SIGINT to the whole
// foreground process group, and the sandboxes this process starts are in
// it: their PID 1, this very binary, would die of it, and the interpreter
// with it. So the repl takes the interrupt character as input instead:
// it sends no signal (VINTR disabled) but ends the line being typed
// (VEOL), and readInput tells it from a line. The terminal's own line
// editing stays.
func ctrlCAsInputLinux(f *os.File) (intr byte, restore func()) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil || old.Lflag&unix.ICANON == 0 || old.Lflag&unix.ISIG == 0 {
		return 0, func() {}
	}
	intr = old.Cc[unix.VINTR]
	if intr == 0 {
		return 0, func() {} // no interrupt character: nothing to take
	}
	t := *old
	t.Cc[unix.VINTR] = 0 // _POSIX_VDISABLE
	t.Cc[unix.VEOL] = intr
	if unix.IoctlSetTermios(fd, unix.TCSETS, &t) != nil {
		return 0, func() {}
	}
	return intr, func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}
