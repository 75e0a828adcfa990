//go:build linux

package session

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// kmsg reads new kernel log records without blocking. Each session holds
// one, opened at its creation and positioned at the end of the log, to find
// the victims of OOM kills in its memory cgroup when the eBPF collector does
// not report them (see Manager.OOMVictim).
type kmsg struct {
	fd  int // raw, so that reads stay non-blocking (os.File.Fd would not)
	buf []byte
}

func openKmsg() (*kmsg, error) {
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening kernel log: %w", err)
	}
	if _, err := syscall.Seek(fd, 0, io.SeekEnd); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("seeking kernel log: %w", err)
	}
	return &kmsg{fd: fd, buf: make([]byte, 8192)}, nil
}

// oomKills returns the OOM kill summaries logged since the last call.
func (k *kmsg) oomKills() []OOMKill {
	var out []OOMKill
	for range 4096 {
		n, err := syscall.Read(k.fd, k.buf)
		if errors.Is(err, syscall.EPIPE) {
			continue // records were overwritten before we read them
		}
		if err != nil || n <= 0 {
			return out
		}
		if o, ok, err := ParseOOMKill(k.buf[:n]); err == nil && ok {
			out = append(out, o)
		}
	}
	return out
}

func (k *kmsg) close() { syscall.Close(k.fd) }
