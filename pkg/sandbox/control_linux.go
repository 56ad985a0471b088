package sandbox

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// controlConn is one end of the seqpacket socket between the host and a
// sandbox's PID 1. Each message is one JSON value, with descriptors riding
// along when a run hands over its stdio, mounts and cgroup.
type controlConn struct {
	fd int
	// rc, when set, is fd made non-blocking and waited on by the runtime's
	// poller (see poll): a reader waiting parks its goroutine, not a thread
	// in recvmsg whose P the runtime's sysmon keeps an eye on (and takes
	// after 10 ms, which has it wake every 20 µs for a while after).
	rc   syscall.RawConn
	file *os.File
	mu   sync.Mutex // one sender at a time
	buf  []byte
	// size is the largest message recv takes (default maxControlMessage).
	size int
}

// errControlClosed is the other end closing the socket (or dying).
var errControlClosed = errors.New("control socket closed")

// maxControlMessage bounds a run request: its argv and environment.
const maxControlMessage = 4 << 20

// maxControlFDs bounds the descriptors of one message.
const maxControlFDs = 16

func (c *controlConn) send(v any, fds ...int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxControlMessage {
		return fmt.Errorf("message of %d bytes exceeds %d", len(b), maxControlMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rc != nil {
		werr := c.rc.Write(func(fd uintptr) bool {
			for {
				err = unix.Sendmsg(int(fd), b, oob, nil, unix.MSG_NOSIGNAL)
				if err != unix.EINTR {
					return err != unix.EAGAIN
				}
			}
		})
		return cmp.Or(err, werr)
	}
	for {
		err = unix.Sendmsg(c.fd, b, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// poll makes the socket non-blocking, waited on through the runtime's
// poller; c then owns the descriptor (close closes it).
func (c *controlConn) poll() error {
	if err := unix.SetNonblock(c.fd, true); err != nil {
		return err
	}
	f := os.NewFile(uintptr(c.fd), "control")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	c.rc, c.file = rc, f
	return nil
}

// shutdown ends both directions: a reader waiting sees the end.
func (c *controlConn) shutdown() {
	if c.rc != nil {
		c.rc.Control(func(fd uintptr) { unix.Shutdown(int(fd), unix.SHUT_RDWR) })
		return
	}
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
}

// close closes the socket.
func (c *controlConn) close() {
	if c.file != nil {
		c.file.Close()
		return
	}
	unix.Close(c.fd)
}

// recv reads the next message into v and returns the descriptors that came
// with it (close-on-exec, owned by the caller).
func (c *controlConn) recv(v any) ([]int, error) {
	if c.buf == nil {
		c.buf = make([]byte, cmp.Or(c.size, maxControlMessage))
	}
	oob := make([]byte, unix.CmsgSpace(maxControlFDs*4))
	var n, oobn, flags int
	var err error
	read := func(fd int) bool {
		for {
			n, oobn, flags, _, err = unix.Recvmsg(fd, c.buf, oob, unix.MSG_CMSG_CLOEXEC)
			if err != unix.EINTR {
				return err != unix.EAGAIN
			}
		}
	}
	if c.rc != nil {
		if rerr := c.rc.Read(func(fd uintptr) bool { return read(int(fd)) }); err == nil {
			err = rerr
		}
	} else {
		read(c.fd)
	}
	if err != nil {
		return nil, err
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	closeFDs := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if n == 0 && oobn == 0 {
		return nil, errControlClosed
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeFDs()
		return nil, errors.New("control message truncated")
	}
	if err := json.Unmarshal(c.buf[:n], v); err != nil {
		closeFDs()
		return nil, err
	}
	return fds, nil
}
