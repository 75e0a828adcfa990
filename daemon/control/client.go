package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/kernel/peercred"
	"github.com/sandtrail/sandtrail/record/event"
)

// Dial connects to the daemon's control socket at path; ErrNoDaemon when
// there is none, and ErrNotRoot when the process that serves it is not
// root's (SO_PEERCRED): a request, and run's descriptors, go only to a
// daemon.
func Dial(path string) (*net.UnixConn, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, ErrNoDaemon
		}
		return nil, fmt.Errorf("connecting to the daemon's control socket %s: %w", path, err)
	}
	cr, err := peercred.Read(conn, false)
	if err == nil && cr.UID != 0 {
		err = fmt.Errorf("%w: %s is served by uid %d (pid %d)", ErrNotRoot, path, cr.UID, cr.Pid)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// Send writes req, with files as SCM_RIGHTS.
func Send(conn *net.UnixConn, req *Request, files []*os.File) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	b = append(b, '\n')
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	// The descriptors go with the first byte; the rest follows.
	if _, _, err := conn.WriteMsgUnix(b[:1], oob, nil); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	if _, err := conn.Write(b[1:]); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	return nil
}

// Call sends one request to the socket at path and reads its one
// response. A response that is not OK is returned with an error. A server
// that refuses the caller answers before it reads the request, so a send
// that fails is reported only when no answer can be read.
func Call(path string, req *Request) (*Response, error) {
	conn, err := Dial(path)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	serr := Send(conn, req, nil)
	var resp Response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		if serr != nil {
			return nil, serr
		}
		return nil, fmt.Errorf("reading the daemon's response: %w", err)
	}
	if !resp.OK {
		return &resp, fmt.Errorf("daemon: %s", resp.Error)
	}
	return &resp, nil
}

// Run asks the daemon at path to run req with stdio as the command's
// standard streams, and waits for the result. It returns ErrNoDaemon when
// no daemon is running. When ctx ends first (SIGINT, SIGTERM) it asks the
// daemon to stop the session, and goes on waiting for the result.
//
// onAlert, when not nil, is called with each alert the daemon raises in the
// session while it runs (an alert event not yet journaled: no seq).
func Run(ctx context.Context, path string, req *launch.Request, stdio [3]*os.File, onAlert func(*event.Event)) (*launch.Result, error) {
	conn, err := Dial(path)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := Send(conn, &Request{Op: OpRun, Spec: req}, stdio[:]); err != nil {
		var resp Response
		if json.NewDecoder(conn).Decode(&resp) == nil && !resp.OK {
			return nil, fmt.Errorf("daemon: %s", resp.Error)
		}
		return nil, err
	}
	msgs := make(chan response, 2)
	go readResponses(conn, msgs)
	id := ""
	done := ctx.Done()
	for {
		select {
		case <-done:
			done = nil
			if id != "" {
				_, _ = Call(path, &Request{Op: OpStop, Session: id, Reason: session.ReasonSignal})
			}
		case m := <-msgs:
			if m.err != nil {
				return nil, fmt.Errorf("reading the daemon's response: %w", m.err)
			}
			if m.r.Alert != nil {
				if onAlert != nil {
					onAlert(m.r.Alert)
				}
				continue
			}
			if m.r.Result != nil {
				if !m.r.OK {
					err = fmt.Errorf("daemon: %s", m.r.Error)
				}
				return m.r.Result, err
			}
			if !m.r.OK {
				return nil, fmt.Errorf("daemon: %s", m.r.Error)
			}
			if m.r.Session != nil {
				id = m.r.Session.ID
			}
		}
	}
}

// response is one decoded response line, or the error that ended them.
type response struct {
	r   Response
	err error
}

// readResponses decodes the lines of conn into msgs until an error.
func readResponses(conn *net.UnixConn, msgs chan<- response) {
	dec := json.NewDecoder(conn)
	for {
		var r Response
		if err := dec.Decode(&r); err != nil {
			msgs <- response{err: err}
			return
		}
		msgs <- response{r: r}
	}
}
