package cgroup

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const (
	hybridMountinfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
37 31 0:34 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	pureMountinfo = `22 1 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
	nestedMountinfo = `900 800 0:40 /kubepods/pod1 /sys/fs/cgroup\040x ro,relatime master:1 - cgroup2 cgroup rw
`
)

func TestParseMountInfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Mount
	}{
		{name: "hybrid", in: hybridMountinfo, want: []Mount{
			{Point: "/sys/fs/cgroup/memory", Root: "/", Controllers: []string{"memory"}},
			{Point: "/sys/fs/cgroup/cpu,cpuacct", Root: "/", Controllers: []string{"cpu", "cpuacct"}},
			{Point: "/sys/fs/cgroup/systemd", Root: "/", Controllers: []string{"name=systemd"}},
			{Point: "/sys/fs/cgroup/unified", Root: "/", V2: true},
		}},
		{name: "pure v2", in: pureMountinfo, want: []Mount{{Point: "/sys/fs/cgroup", Root: "/", V2: true}}},
		{name: "namespaced root, escaped space", in: nestedMountinfo, want: []Mount{{Point: "/sys/fs/cgroup x", Root: "/kubepods/pod1", V2: true}}},
		{name: "no cgroups", in: "22 27 0:21 / /proc rw,relatime - proc proc rw\n\n", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountInfo([]byte(tt.in))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseMountInfo(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseMountInfoErrors(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"no separator", "29 22 0:26 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n"},
		{"short", "29 22 0:26 / - cgroup2 cgroup2 rw\n"},
		{"short after separator", "29 22 0:26 / /sys/fs/cgroup rw - cgroup2\n"},
		{"relative mount point", "29 22 0:26 / sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
		{"garbage", "no separator here\n - \n"},
		{"too long", strings.Repeat("x", maxParseInput+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := ParseMountInfo([]byte(tt.in)); !errors.Is(err, ErrParse) {
				t.Errorf("ParseMountInfo(%.40q) = %v, %v, want ErrParse", tt.in, got, err)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{name: "space", in: `/mnt/with\040space`, want: "/mnt/with space"},
		{name: "backslash", in: `/a\134b`, want: `/a\b`},
		{name: "not octal", in: `/a\09b`, want: `/a\09b`},
		{name: "short at end", in: `/a\04`, want: `/a\04`},
		{name: "none", in: "/plain", want: "/plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unescapeMount(tt.in); got != tt.want {
				t.Errorf("unescapeMount(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFindV2(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Mount
		wantErr error
	}{
		{name: "hybrid", in: hybridMountinfo, want: Mount{Point: "/sys/fs/cgroup/unified", Root: "/", V2: true}},
		{name: "pure v2", in: pureMountinfo, want: Mount{Point: "/sys/fs/cgroup", Root: "/", V2: true}},
		{name: "namespaced", in: nestedMountinfo, want: Mount{Point: "/sys/fs/cgroup x", Root: "/kubepods/pod1", V2: true}},
		{name: "v1 only", in: hybridMountinfo[:strings.Index(hybridMountinfo, "41 ")], wantErr: ErrNoV2},
		{name: "garbage", in: "no separator here\n - \n", wantErr: ErrParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindV2([]byte(tt.in))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("FindV2() = %+v, %v, want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FindV2() = %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ProcCgroups
		wantErr bool
	}{
		{"v2 only", "0::/a/b\n", ProcCgroups{V2: "/a/b", HasV2: true, V1: map[string]string{}}, false},
		{"hybrid", "4:memory:/x\n1:cpu,cpuacct:/\n1:name=systemd:/s\n0::/\n",
			ProcCgroups{V2: "/", HasV2: true, V1: map[string]string{"memory": "/x", "cpu": "/", "cpuacct": "/", "name=systemd": "/s"}}, false},
		{"v1 only", "4:memory:/x\n", ProcCgroups{V1: map[string]string{"memory": "/x"}}, false},
		{"path with colon", "0::/a:b\n", ProcCgroups{V2: "/a:b", HasV2: true, V1: map[string]string{}}, false},
		{"dot dot cleaned", "0::/a/../b\n", ProcCgroups{V2: "/b", HasV2: true, V1: map[string]string{}}, false},
		{"missing fields", "0:/\n", ProcCgroups{}, true},
		{"bad id", "x::/\n", ProcCgroups{}, true},
		{"relative path", "0::a\n", ProcCgroups{}, true},
		{"v1 without controllers", "3::/\n", ProcCgroups{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcCgroup([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Errorf("ParseProcCgroup(%q) = %v, want ErrParse", tt.in, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseProcCgroup(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestV2Path(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr error
	}{
		{name: "hybrid", in: "9:name=systemd:/\n4:memory:/x\n0::/sess/A\n", want: "/sess/A"},
		{name: "pure", in: "0::/user.slice/a.scope\n", want: "/user.slice/a.scope"},
		{name: "root", in: "0::/\n", want: "/"},
		{name: "dot dot cleaned", in: "0::/a/../b\n", want: "/b"},
		{name: "v1 only", in: "4:memory:/x\n", wantErr: ErrNoV2},
		{name: "relative", in: "0::a\n", wantErr: ErrParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := V2Path([]byte(tt.in))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("V2Path(%q) = %q, %v, want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDirAndAncestors(t *testing.T) {
	tests := []struct {
		name    string
		m       Mount
		cg      string
		want    string
		wantErr bool
		anc     []string
	}{
		{name: "inside", m: Mount{Point: "/sys/fs/cgroup", Root: "/ns"}, cg: "/ns/a/b", want: "/sys/fs/cgroup/a/b", anc: []string{"/ns/a/b", "/ns/a", "/ns"}},
		{name: "mount root", m: Mount{Point: "/sys/fs/cgroup", Root: "/ns"}, cg: "/ns", want: "/sys/fs/cgroup", anc: []string{"/ns"}},
		{name: "sibling with a shared prefix", m: Mount{Point: "/sys/fs/cgroup", Root: "/ns"}, cg: "/nsx/a", wantErr: true},
		{name: "above the root", m: Mount{Point: "/sys/fs/cgroup", Root: "/ns"}, cg: "/", wantErr: true},
		{name: "whole hierarchy", m: Mount{Point: "/m", Root: "/"}, cg: "/x/y", want: "/m/x/y", anc: []string{"/x/y", "/x", "/"}},
		{name: "dot dot cannot climb out", m: Mount{Point: "/m", Root: "/"}, cg: "/../../etc", want: "/m/etc", anc: []string{"/etc", "/"}},
		{name: "relative cg is rooted", m: Mount{Point: "/m", Root: "/"}, cg: "a", want: "/m/a", anc: []string{"/a", "/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.m.Dir(tt.cg)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("Dir(%q) = %q, %v, want %q (error %v)", tt.cg, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrOutside) {
				t.Fatalf("Dir(%q) = %v, want ErrOutside", tt.cg, err)
			}
			if tt.anc != nil {
				if a := tt.m.Ancestors(tt.cg); !slices.Equal(a, tt.anc) {
					t.Fatalf("Ancestors(%q) = %q, want %q", tt.cg, a, tt.anc)
				}
			}
		})
	}
}
