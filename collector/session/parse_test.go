package session

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDetectLayout(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		cgroup    string
		wantV2    Dir
		wantV1    map[string]Dir
		wantErr   error
	}{
		{
			name: "hybrid, this project's machines", mountinfo: "mountinfo-hybrid.txt", cgroup: "cgroup-hybrid.txt",
			wantV2: Dir{Path: "/sys/fs/cgroup/unified", Rel: "/"},
			wantV1: map[string]Dir{
				"cpu":     {Path: "/sys/fs/cgroup/cpu", Rel: "/"},
				"cpuacct": {Path: "/sys/fs/cgroup/cpuacct", Rel: "/"},
				"cpuset":  {Path: "/sys/fs/cgroup/cpuset", Rel: "/"},
				"memory":  {Path: "/sys/fs/cgroup/memory/process_api/6aed80e232d45238258961d5be01cb58", Rel: "/process_api/6aed80e232d45238258961d5be01cb58"},
				"devices": {Path: "/sys/fs/cgroup/devices", Rel: "/"},
				"freezer": {Path: "/sys/fs/cgroup/freezer", Rel: "/"},
				"blkio":   {Path: "/sys/fs/cgroup/blkio", Rel: "/"},
				"pids":    {Path: "/sys/fs/cgroup/pids", Rel: "/"},
			},
		},
		{
			name: "systemd hybrid, co-mounted cpu,cpuacct", mountinfo: "mountinfo-systemd-hybrid.txt", cgroup: "cgroup-systemd-hybrid.txt",
			wantV2: Dir{Path: "/sys/fs/cgroup/unified/system.slice/sandtrail.service", Rel: "/system.slice/sandtrail.service"},
			wantV1: map[string]Dir{
				"cpu":     {Path: "/sys/fs/cgroup/cpu,cpuacct/system.slice/sandtrail.service", Rel: "/system.slice/sandtrail.service"},
				"cpuacct": {Path: "/sys/fs/cgroup/cpu,cpuacct/system.slice/sandtrail.service", Rel: "/system.slice/sandtrail.service"},
				"memory":  {Path: "/sys/fs/cgroup/memory/system.slice/sandtrail.service", Rel: "/system.slice/sandtrail.service"},
				"pids":    {Path: "/sys/fs/cgroup/pids/system.slice/sandtrail.service", Rel: "/system.slice/sandtrail.service"},
				"freezer": {Path: "/sys/fs/cgroup/freezer", Rel: "/"},
			},
		},
		{
			name: "pure v2", mountinfo: "mountinfo-purev2.txt", cgroup: "cgroup-purev2.txt",
			wantV2: Dir{Path: "/sys/fs/cgroup/system.slice/sandtrail.service", Rel: "/system.slice/sandtrail.service"},
			wantV1: map[string]Dir{},
		},
		{
			name: "container: mount root is a subtree", mountinfo: "mountinfo-container.txt", cgroup: "cgroup-container.txt",
			wantV2: Dir{Path: "/sys/fs/cgroup/inner", Rel: "/docker/abc/inner"},
			wantV1: map[string]Dir{},
		},
		{
			name: "no cgroup2 mount", mountinfo: "mountinfo-container.txt", cgroup: "cgroup-hybrid.txt",
			wantErr: ErrNoCgroups,
		},
		{
			name: "own cgroup outside the mount", mountinfo: "mountinfo-container.txt", cgroup: "cgroup-purev2.txt",
			wantErr: ErrNoCgroups,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := DetectLayout(readTestdata(t, tt.mountinfo), readTestdata(t, tt.cgroup))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("DetectLayout(%s, %s) = %v, want %v", tt.mountinfo, tt.cgroup, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DetectLayout(%s, %s) = %v", tt.mountinfo, tt.cgroup, err)
			}
			if l.V2 != tt.wantV2 {
				t.Errorf("DetectLayout(%s).V2 = %+v, want %+v", tt.mountinfo, l.V2, tt.wantV2)
			}
			if !reflect.DeepEqual(l.V1, tt.wantV1) {
				t.Errorf("DetectLayout(%s).V1 = %+v, want %+v", tt.mountinfo, l.V1, tt.wantV1)
			}
			if got, want := l.Hybrid(), len(tt.wantV1) > 0; got != want {
				t.Errorf("Hybrid() = %v, want %v", got, want)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	hybrid, err := DetectLayout(readTestdata(t, "mountinfo-hybrid.txt"), readTestdata(t, "cgroup-hybrid.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pure, err := DetectLayout(readTestdata(t, "mountinfo-purev2.txt"), readTestdata(t, "cgroup-purev2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		l        *Layout
		avail    []string
		v2freeze bool
		want     map[string]backend
	}{
		{"hybrid, v2 without controllers", hybrid, nil, true,
			map[string]backend{"memory": backendV1, "pids": backendV1, "cpu": backendV1, "freezer": backendV2}},
		{"hybrid, old kernel without cgroup.freeze", hybrid, nil, false,
			map[string]backend{"memory": backendV1, "pids": backendV1, "cpu": backendV1, "freezer": backendV1}},
		{"hybrid, v2 got pids", hybrid, []string{"pids"}, true,
			map[string]backend{"memory": backendV1, "pids": backendV2, "cpu": backendV1, "freezer": backendV2}},
		{"pure v2", pure, []string{"cpuset", "cpu", "io", "memory", "pids"}, true,
			map[string]backend{"memory": backendV2, "pids": backendV2, "cpu": backendV2, "freezer": backendV2}},
		{"pure v2 without delegation", pure, nil, true,
			map[string]backend{"memory": backendNone, "pids": backendNone, "cpu": backendNone, "freezer": backendV2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.plan(tt.avail, tt.v2freeze); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("plan(%v, %v) = %v, want %v", tt.avail, tt.v2freeze, got, tt.want)
			}
		})
	}
}

func TestParseKeyed(t *testing.T) {
	tests := []struct {
		name string
		file string
		key  string
		want int64
	}{
		{"v2 memory.events oom_kill", "memory.events", "oom_kill", 2},
		{"v2 memory.events max", "memory.events", "max", 112},
		{"v2 cpu.stat throttled_usec", "cpu.stat-v2", "throttled_usec", 16587541},
		{"v2 cpu.stat nr_throttled", "cpu.stat-v2", "nr_throttled", 205},
		{"v1 cpu.stat throttled_time", "cpu.stat-v1", "throttled_time", 1850339442},
		{"pids.events max", "pids.events", "max", 1713},
		{"v1 memory.oom_control oom_kill", "memory.oom_control", "oom_kill", 1},
		{"v1 memory.oom_control under_oom", "memory.oom_control", "under_oom", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseKeyed(readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("ParseKeyed(%s) = %v", tt.file, err)
			}
			if got, ok := m[tt.key]; !ok || got != tt.want {
				t.Errorf("ParseKeyed(%s)[%s] = %d, %v, want %d", tt.file, tt.key, got, ok, tt.want)
			}
		})
	}
	for _, bad := range []string{"max\n", "a b c\n", "a 1.5\n", "a -\n"} {
		if _, err := ParseKeyed([]byte(bad)); !errors.Is(err, ErrParse) {
			t.Errorf("ParseKeyed(%q) = %v, want ErrParse", bad, err)
		}
	}
	if m, err := ParseKeyed([]byte("pids max\n")); err != nil || m["pids"] != math.MaxInt64 {
		t.Errorf(`ParseKeyed("pids max") = %v, %v, want MaxInt64`, m, err)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"4096", 4096, false},
		{"64M", 64 << 20, false},
		{"64m", 64 << 20, false},
		{"64MB", 64 << 20, false},
		{"64MiB", 64 << 20, false},
		{"512k", 512 << 10, false},
		{"1G", 1 << 30, false},
		{"1.5g", 3 << 29, false},
		{".5G", 1 << 29, false},
		{"2T", 2 << 40, false},
		{" 10 MiB ", 10 << 20, false},
		{"100b", 100, false},
		{"", 0, true},
		{"M", 0, true},
		{"-1M", 0, true},
		{"0", 0, true},
		{"1e6", 0, true},
		{"0x10", 0, true},
		{"1.M", 0, true},
		{"1.2.3M", 0, true},
		{"10000000000T", 0, true},
		{"9223372036854775807", 9223372036854775807, false},
		{"9223372036854775808", 0, true},
		{"12 apples", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Errorf("ParseSize(%q) = %d, %v, want ErrParse", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseSize(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseOOMKill(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    OOMKill
		ok      bool
		wantErr bool
	}{
		{"kmsg record", string(readTestdata(t, "kmsg-oom.txt")), OOMKill{
			Constraint: "CONSTRAINT_MEMCG", OOMMemcg: "/process_api/6aed/sandtrail-01m8k5m1m8c47tpv",
			TaskMemcg: "/process_api/6aed/sandtrail-01m8k5m1m8c47tpv", Task: "session.test", Pid: 2140}, true, false},
		{"bare message, v2 path", "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/s,task_memcg=/s/inner,task=py,pid=7,uid=1000",
			OOMKill{Constraint: "CONSTRAINT_MEMCG", OOMMemcg: "/s", TaskMemcg: "/s/inner", Task: "py", Pid: 7, UID: 1000}, true, false},
		{"comm with comma and pid=", "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/s,task=a,pid=1,b,pid=99,uid=0",
			OOMKill{Constraint: "CONSTRAINT_NONE", TaskMemcg: "/s", Task: "a,pid=1,b", Pid: 99}, true, false},
		{"other record", "6,343,1356877,-;EXT4-fs (vda): mounted filesystem", OOMKill{}, false, false},
		{"no pid", "oom-kill:constraint=X,task_memcg=/s,task=a,uid=0", OOMKill{}, false, true},
		{"bad pid", "oom-kill:constraint=X,task_memcg=/s,task=a,pid=-4,uid=0", OOMKill{}, false, true},
		{"no task", "oom-kill:constraint=X,task_memcg=/s", OOMKill{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseOOMKill([]byte(tt.in))
			if tt.wantErr {
				if !errors.Is(err, ErrParse) {
					t.Errorf("ParseOOMKill(%q) = %+v, %v, %v, want ErrParse", tt.in, got, ok, err)
				}
				return
			}
			if err != nil || ok != tt.ok || got != tt.want {
				t.Errorf("ParseOOMKill(%q) = %+v, %v, %v, want %+v, %v", tt.in, got, ok, err, tt.want, tt.ok)
			}
		})
	}
}
