package server

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	const hybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const pure = `22 1 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
	const nested = `900 800 0:40 /kubepods/pod1 /sys/fs/cgroup\040x ro,relatime master:1 - cgroup2 cgroup rw
`
	tests := []struct {
		name    string
		in      string
		want    Cgroup2
		wantErr error
	}{
		{name: "hybrid", in: hybrid, want: Cgroup2{Mount: "/sys/fs/cgroup/unified", Root: "/"}},
		{name: "pure v2", in: pure, want: Cgroup2{Mount: "/sys/fs/cgroup", Root: "/"}},
		{name: "namespaced root, escaped space", in: nested, want: Cgroup2{Mount: "/sys/fs/cgroup x", Root: "/kubepods/pod1"}},
		{name: "v1 only", in: hybrid[:strings.Index(hybrid, "41 ")], wantErr: ErrNoCgroup2},
		{name: "garbage", in: "no separator here\n - \n", wantErr: ErrNoCgroup2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMountinfo(strings.NewReader(tt.in))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("parseMountinfo() = %+v, %v, want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseMountinfo() = %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "hybrid", in: "9:name=systemd:/\n4:memory:/x\n0::/sess/A\n", want: "/sess/A"},
		{name: "pure", in: "0::/user.slice/a.scope\n", want: "/user.slice/a.scope"},
		{name: "root", in: "0::/\n", want: "/"},
		{name: "dot dot cleaned", in: "0::/a/../b\n", want: "/b"},
		{name: "v1 only", in: "4:memory:/x\n", wantErr: true},
		{name: "relative", in: "0::a\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcCgroup([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseProcCgroup(%q) = %q, %v, want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCgroupDirAndAncestors(t *testing.T) {
	h := Cgroup2{Mount: "/sys/fs/cgroup", Root: "/ns"}
	tests := []struct {
		name    string
		cg      string
		want    string
		wantErr bool
		anc     []string
	}{
		{name: "inside", cg: "/ns/a/b", want: "/sys/fs/cgroup/a/b", anc: []string{"/ns/a/b", "/ns/a", "/ns"}},
		{name: "root", cg: "/ns", want: "/sys/fs/cgroup", anc: []string{"/ns"}},
		{name: "outside", cg: "/nsx/a", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.Dir(tt.cg)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("Dir(%q) = %q, %v, want %q (error %v)", tt.cg, got, err, tt.want, tt.wantErr)
			}
			if tt.anc != nil {
				if a := h.ancestors(tt.cg); !slices.Equal(a, tt.anc) {
					t.Fatalf("ancestors(%q) = %q, want %q", tt.cg, a, tt.anc)
				}
			}
		})
	}
	if a := (Cgroup2{Mount: "/m", Root: "/"}).ancestors("/x/y"); !slices.Equal(a, []string{"/x/y", "/x", "/"}) {
		t.Fatalf("ancestors(/x/y) = %q, want [/x/y /x /]", a)
	}
}
