package control

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/cgroup"
)

// sessionsOf maps cgroup ids to sessions, as the session manager does.
type sessionsOf map[uint64]string

func (s sessionsOf) Lookup(id uint64) (string, bool) {
	sid, ok := s[id]
	return sid, ok
}

// TestControlRefusesRootInSession: root whose cgroup is a session's (an
// apt maintainer script the broker runs, a session started as root) is
// refused before any op, by the one attribution step; root outside every
// session is served.
func TestControlRefusesRootInSession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the control socket serves only uid 0")
	}
	dir, err := cgroup.OwnDir()
	if err != nil {
		t.Skipf("needs a cgroup v2 hierarchy: %v", err)
	}
	own, err := cgroup.ID(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		sessions sessionsOf
		want     string
	}{
		{"root outside every session", sessionsOf{}, ""},
		{"root in a session", sessionsOf{own: "s-agent"}, "a process of session s-agent may not use the control socket"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "control.sock")
			ln, err := Listen(path)
			if err != nil {
				t.Fatal(err)
			}
			c := Serve(ln, nil, attribution.New(tt.sessions), hclog.NewNullLogger())
			defer c.Close()
			resp, err := Call(path, &Request{Op: "list"})
			if tt.want == "" {
				if err != nil || !resp.OK {
					t.Errorf("list = %+v, %v, want ok", resp, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("list from a session's root = %+v, want refused", resp)
			}
			got := err.Error()
			if !strings.Contains(got, tt.want) {
				t.Errorf("list from a session's root: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestControlProtocol exercises the control socket's framing, descriptor
// passing and errors against a server with no sessions.
func TestControlProtocol(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the control socket serves only uid 0")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "control.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket mode = %v, %v, want 0600", fi.Mode().Perm(), err)
	}
	if _, err := Listen(path); err == nil {
		t.Error("Listen() on a served socket = nil, want an error")
	}
	c := Serve(ln, nil, attribution.New(sessionsOf{}), hclog.NewNullLogger())
	defer c.Close()

	resp, err := Call(path, &Request{Op: "list"})
	if err != nil || !resp.OK || len(resp.Sessions) != 0 {
		t.Errorf("list = %+v, %v, want ok and no sessions", resp, err)
	}
	tests := []struct {
		name  string
		req   Request
		files int
		want  string
	}{
		{name: "unknown session", req: Request{Op: "pause", Session: "nope"}, want: `no session "nope"`},
		{name: "run without descriptors", req: Request{Op: "run"}, want: "want stdin, stdout and stderr descriptors, got 0"},
		{name: "run without spec", req: Request{Op: "run"}, files: 3, want: "run: no spec"},
		{name: "create without spec", req: Request{Op: "create"}, want: "create: no spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := Dial(path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var files []*os.File
			for range tt.files {
				files = append(files, os.Stderr)
			}
			if err := Send(conn, &tt.req, files); err != nil {
				t.Fatal(err)
			}
			var r Response
			if err := jsonDecode(conn, &r); err != nil {
				t.Fatal(err)
			}
			if r.OK || !strings.Contains(r.Error, tt.want) {
				t.Errorf("%s = %+v, want an error containing %q", tt.req.Op, r, tt.want)
			}
		})
	}
	// Garbage is refused with an error, not a crash.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("{nonsense\n"))
	var r Response
	if err := jsonDecode(conn, &r); err != nil || r.OK || !strings.Contains(r.Error, "decoding request") {
		t.Errorf("garbage request = %+v, %v, want a decoding error", r, err)
	}
	conn.Close()

	if _, err := Call(filepath.Join(dir, "absent.sock"), &Request{Op: "list"}); err != ErrNoDaemon {
		t.Errorf("Call(absent socket) = %v, want ErrNoDaemon", err)
	}
}

func jsonDecode(conn net.Conn, v any) error {
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return json.NewDecoder(conn).Decode(v)
}
