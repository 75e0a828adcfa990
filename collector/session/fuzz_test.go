package session

import (
	"strings"
	"testing"
)

// The parsers read files that a session's processes can partly influence.
// They must never panic, and what they accept must be self-consistent.

func FuzzDetectLayout(f *testing.F) {
	f.Add(readTestdata(f, "mountinfo-hybrid.txt"), readTestdata(f, "cgroup-hybrid.txt"))
	f.Add(readTestdata(f, "mountinfo-container.txt"), readTestdata(f, "cgroup-container.txt"))
	f.Fuzz(func(t *testing.T, mi, cg []byte) {
		l, err := DetectLayout(mi, cg)
		if err != nil {
			return
		}
		// A session cgroup is made beneath these: they must not climb out
		// of their mount.
		for _, d := range append([]Dir{l.V2}, func() (ds []Dir) {
			for _, d := range l.V1 {
				ds = append(ds, d)
			}
			return
		}()...) {
			if strings.Contains(d.Path, "/../") || strings.HasSuffix(d.Path, "/..") {
				t.Errorf("DetectLayout(%q, %q) = dir %q climbs out", mi, cg, d.Path)
			}
		}
	})
}

func FuzzParseKeyed(f *testing.F) {
	for _, n := range []string{"memory.events", "cpu.stat-v1", "cpu.stat-v2", "pids.events", "memory.oom_control"} {
		f.Add(readTestdata(f, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseKeyed(b)
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || strings.ContainsAny(k, " \t\n") {
				t.Errorf("ParseKeyed(%q) has key %q", b, k)
			}
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64M", "512MiB", "1.5g", "4096", ".5T", "9223372036854775807", "1e6", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err == nil && v <= 0 {
			t.Errorf("ParseSize(%q) = %d, want positive or an error", s, v)
		}
	})
}

func FuzzParseOOMKill(f *testing.F) {
	f.Add(readTestdata(f, "kmsg-oom.txt"))
	f.Add([]byte("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/s,task=a,pid=1,b,pid=99,uid=0"))
	f.Add([]byte("6,343,1356877,-;EXT4-fs (vda): mounted filesystem"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, ok, err := ParseOOMKill(b)
		if err != nil && ok {
			t.Errorf("ParseOOMKill(%q) = ok with error %v", b, err)
		}
		if ok && k.Pid <= 0 {
			t.Errorf("ParseOOMKill(%q) = pid %d, want positive", b, k.Pid)
		}
	})
}
