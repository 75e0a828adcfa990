package session

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	cgroups "github.com/sandtrail/sandtrail/kernel/cgroup"
)

// ErrNoCgroups is returned when no usable cgroup hierarchy is mounted.
var ErrNoCgroups = errors.New("session: no cgroup2 hierarchy mounted")

// Dir is one cgroup directory: its path on disk and its path inside its
// hierarchy (what /proc/<pid>/cgroup and the kernel log print).
type Dir struct {
	Path string
	Rel  string
}

// Layout says where the current process's cgroups are: its cgroup in the
// unified (v2) hierarchy, and its cgroup in each mounted v1 controller
// hierarchy. Session cgroups are created beneath these, never elsewhere.
type Layout struct {
	// V2 is this process's v2 cgroup. Sessions need one: it is their
	// identity (the cgroup id BPF programs see) and their attach point.
	V2 Dir
	// V1 maps each v1 controller ("memory", "cpu", ...) to this process's
	// cgroup in the hierarchy that holds it. Co-mounted controllers
	// ("cpu,cpuacct") map to the same Dir. Empty on a pure v2 host.
	V1 map[string]Dir
}

// Hybrid reports whether v1 controller hierarchies are mounted next to v2.
func (l *Layout) Hybrid() bool { return len(l.V1) > 0 }

// DetectLayout computes the layout from the contents of
// /proc/self/mountinfo and /proc/self/cgroup, parsed by package
// kernel/cgroup (whose errors wrap cgroup.ErrParse). It returns
// ErrNoCgroups when there is no cgroup2 mount, and an error when the process's cgroup lies
// outside what a mount shows (so a session cgroup could not be made
// beneath it).
func DetectLayout(mountinfo, proccgroup []byte) (*Layout, error) {
	mounts, err := cgroups.ParseMountInfo(mountinfo)
	if err != nil {
		return nil, err
	}
	pc, err := cgroups.ParseProcCgroup(proccgroup)
	if err != nil {
		return nil, err
	}
	l := &Layout{V1: map[string]Dir{}}
	found := false
	for _, m := range mounts {
		if m.V2 {
			if found || !pc.HasV2 {
				continue
			}
			d, ok := under(m, pc.V2)
			if !ok {
				continue
			}
			l.V2, found = d, true
			continue
		}
		for _, c := range m.Controllers {
			if strings.HasPrefix(c, "name=") {
				continue
			}
			if _, done := l.V1[c]; done {
				continue
			}
			p, ok := pc.V1[c]
			if !ok {
				continue
			}
			if d, ok := under(m, p); ok {
				l.V1[c] = d
			}
		}
	}
	if !found {
		if pc.HasV2 {
			return nil, fmt.Errorf("%w: or the v2 cgroup %q is not visible under any cgroup2 mount", ErrNoCgroups, pc.V2)
		}
		return nil, ErrNoCgroups
	}
	return l, nil
}

// under returns the directory of hierarchy path p under mount m, if the
// mount shows it.
func under(m cgroups.Mount, p string) (Dir, bool) {
	dir, err := m.Dir(p)
	if err != nil {
		return Dir{}, false
	}
	return Dir{Path: dir, Rel: path.Clean("/" + p)}, true
}

// backend says which hierarchy provides a resource for a session.
type backend string

const (
	backendNone backend = ""
	backendV1   backend = "v1"
	backendV2   backend = "v2"
)

// plan decides, for each resource a session uses, which hierarchy provides
// it. v2avail is the content of the parent v2 cgroup's cgroup.controllers,
// and v2freeze says whether the kernel has cgroup.freeze (Linux 5.2+). A
// controller available in v2 is used there (pure v2, or a hybrid host that
// gives v2 some controllers); otherwise its v1 hierarchy is used. Freezing
// uses cgroup.freeze when present: it needs no controller and covers
// exactly the session's identity cgroup.
func (l *Layout) plan(v2avail []string, v2freeze bool) map[string]backend {
	out := map[string]backend{}
	for _, c := range []string{"memory", "pids", "cpu"} {
		switch {
		case slices.Contains(v2avail, c):
			out[c] = backendV2
		case l.V1[c] != (Dir{}):
			out[c] = backendV1
		default:
			out[c] = backendNone
		}
	}
	switch {
	case v2freeze:
		out["freezer"] = backendV2
	case l.V1["freezer"] != (Dir{}):
		out["freezer"] = backendV1
	default:
		out["freezer"] = backendNone
	}
	return out
}
