//go:build linux

package session

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzReadState: whatever a session's state file holds (a manager killed
// while writing it leaves any prefix of it), the state read names that
// session and no other, and the cgroups adopted from it are only existing
// cgroups named for the session: a path the file names elsewhere, or a
// directory that is no cgroup, is never among those killed and removed.
func FuzzReadState(f *testing.F) {
	f.Add([]byte(`{"id":"sess-1","limits":{"memory_bytes":1048576},"v2":{"Path":"V2/sandtrail-sess-1","Rel":"/sandtrail-sess-1"},"uid":1509949441}`), "sess-1")
	f.Add([]byte(`{"id":"sess-1","v2":{"Path":"DECOY/sandtrail-sess-1"},"v1":{"memory":{"Path":"DECOY/notacgroup"},"pids":{"Path":"V2"}}}`), "sess-1")
	f.Add([]byte(`{"id":"other","v2":{"Path":"DECOY/sandtrail-other"}}`), "sess-1")
	f.Add([]byte(`{"id":"sess-1","v2":{"Pa`), "sess-1")
	f.Fuzz(func(t *testing.T, b []byte, id string) {
		if !idRE.MatchString(id) {
			return
		}
		dir := t.TempDir()
		v2 := filepath.Join(dir, "v2")
		decoy := filepath.Join(dir, "decoy")
		name := "sandtrail-" + id
		for _, d := range []string{filepath.Join(v2, name), filepath.Join(decoy, name), filepath.Join(decoy, "sandtrail-other"), filepath.Join(decoy, "notacgroup")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{filepath.Join(v2, "cgroup.controllers"), filepath.Join(v2, name, "cgroup.procs"), filepath.Join(decoy, "sandtrail-other", "cgroup.procs")} {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s := strings.NewReplacer("V2", v2, "DECOY", decoy).Replace(string(b))
		p := filepath.Join(dir, stateFile)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		st := readState(fh, id)
		if st.ID != id {
			t.Fatalf("readState(%q, %q).ID = %q", s, id, st.ID)
		}
		l := &Layout{V2: Dir{Path: v2, Rel: "/"}}
		c, err := adoptCgroup(l, name, st)
		if err != nil {
			return
		}
		if c.fd != nil {
			c.fd.Close()
		}
		for _, d := range c.dirs {
			if filepath.Base(d) != name {
				t.Fatalf("adoptCgroup of %q adopts %s, not a cgroup named %s", s, d, name)
			}
			if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
				t.Fatalf("adoptCgroup of %q adopts %s, which is no cgroup", s, d)
			}
		}
	})
}

// FuzzPasswdFor: whatever the host's /etc/passwd holds, the session's has
// exactly one account of the agent's name with seven fields, of the
// session's uid, and every other line of the host's as it was, in order.
func FuzzPasswdFor(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\nsandtrail-agent:x:999:999::/home/sandtrail-agent:/bin/sh\n"))
	f.Add([]byte("sandtrail-agent:x:0:0:a:b:c\nsandtrail-agent:x:1:1:a:b:c\nsandtrail-agent::::\n"))
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\r\n\n+::::::\nno newline at end"))
	f.Add([]byte(""))
	a := &Agent{Name: "sandtrail-agent", GID: 999}
	const uid = 0x5a000001
	f.Fuzz(func(t *testing.T, host []byte) {
		if len(host) > 1<<16 {
			return
		}
		out := string(passwdFor(host, a, uid))
		if !strings.HasSuffix(out, "\n") {
			t.Fatalf("passwdFor(%q) = %q, not ending in a newline", host, out)
		}
		var in []string
		if len(host) > 0 {
			for _, l := range strings.Split(strings.TrimSuffix(string(host), "\n"), "\n") {
				in = append(in, strings.TrimSuffix(l, "\r"))
			}
		}
		agents := 0
		var rest []string
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if f := strings.Split(l, ":"); len(f) == 7 && f[0] == a.Name {
				agents++
				if f[2] != strconv.Itoa(uid) {
					t.Fatalf("passwdFor(%q) gives the agent uid %s, want %d", host, f[2], uid)
				}
				continue
			}
			rest = append(rest, l)
		}
		if agents != 1 {
			t.Fatalf("passwdFor(%q) = %q: %d accounts named %s, want 1", host, out, agents, a.Name)
		}
		var others []string
		for _, l := range in {
			if f := strings.Split(l, ":"); len(f) != 7 || f[0] != a.Name {
				others = append(others, l)
			}
		}
		if strings.Join(rest, "\n") != strings.Join(others, "\n") {
			t.Fatalf("passwdFor(%q) = %q: the other lines are %q, want %q", host, out, rest, others)
		}
	})
}
