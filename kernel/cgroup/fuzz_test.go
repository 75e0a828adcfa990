package cgroup

import (
	"path/filepath"
	"strings"
	"testing"
)

// The parsers read files that a sandboxed process can partly influence.
// They must never panic, and what they accept must be self-consistent.
// Seeds are in testdata/fuzz.

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte(hybridMountinfo))
	f.Add([]byte(nestedMountinfo))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseMountInfo(b)
		if err != nil {
			return
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Point, "/") || !strings.HasPrefix(m.Root, "/") {
				t.Errorf("ParseMountInfo(%q) = mount %+v, want absolute paths", b, m)
			}
			if m.V2 && len(m.Controllers) > 0 {
				t.Errorf("ParseMountInfo(%q) = v2 mount with controllers %v", b, m.Controllers)
			}
			// Whatever a process names its cgroups, their directories
			// stay beneath the mount point.
			pt := strings.TrimSuffix(filepath.Clean(m.Point), "/") + "/"
			if d, err := m.Dir(m.Root + "/../../x"); err == nil && !strings.HasPrefix(d, pt) {
				t.Errorf("Mount%+v.Dir(../../x) = %q, outside the mount point", m, d)
			}
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("4:memory:/x\n1:cpu,cpuacct:/\n0::/a/b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pc, err := ParseProcCgroup(b)
		if err != nil {
			return
		}
		if pc.HasV2 && !strings.HasPrefix(pc.V2, "/") {
			t.Errorf("ParseProcCgroup(%q).V2 = %q, want absolute", b, pc.V2)
		}
		if p, err := V2Path(b); pc.HasV2 != (err == nil) || p != pc.V2 {
			t.Errorf("V2Path(%q) = %q, %v, want %q", b, p, err, pc.V2)
		}
	})
}
