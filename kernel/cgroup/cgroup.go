// Package cgroup finds the cgroup hierarchies and the cgroups of processes:
// it parses /proc/<pid>/mountinfo (ParseMountInfo) and /proc/<pid>/cgroup
// (ParseProcCgroup), locates the unified (v2) hierarchy (FindV2, ReadV2),
// maps a cgroup path to its directory (Mount.Dir), and reads the id of a
// v2 cgroup, which is the inode number of its directory (ID, FileID): what
// bpf_get_current_cgroup_id returns.
//
// Trust: the parsers read procfs text that a process inside a sandbox can
// partly influence (mount points it creates, names of cgroups it makes
// beneath its own), so they bound their work, reject what they do not
// understand with an error wrapping ErrParse, and never panic. Each has a
// fuzz target with seeds in testdata.
//
// The package imports only the standard library, so that collector/session
// and record/ingest/server can both build on it.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrParse is wrapped by every error of the parsers in this package.
var ErrParse = errors.New("cgroup: parse error")

// ErrNoV2 is returned when there is no cgroup v2 hierarchy mounted, or a
// process is not in one.
var ErrNoV2 = errors.New("cgroup: no cgroup v2 hierarchy")

// ErrOutside is returned for a cgroup that lies outside what a mount shows.
var ErrOutside = errors.New("cgroup: cgroup outside the mount")

// ErrNotSupported is returned by ID and FileID on systems without cgroups.
var ErrNotSupported = errors.New("cgroup: not supported on this system")

// maxParseInput bounds the bytes a parser looks at.
const maxParseInput = 1 << 20

// Mount is one cgroup file system from /proc/<pid>/mountinfo.
type Mount struct {
	// Point is where it is mounted, for example /sys/fs/cgroup on a pure
	// v2 host, /sys/fs/cgroup/unified for v2 on a hybrid one, or
	// /sys/fs/cgroup/memory for a v1 hierarchy.
	Point string
	// Root is the mount's root inside the hierarchy, "/" unless a
	// cgroup namespace or a bind mount shows only a subtree.
	Root string
	// V2 is true for the unified (cgroup2) hierarchy.
	V2 bool
	// Controllers are the v1 controllers of the hierarchy ("cpu",
	// "cpuacct"), and named hierarchies as "name=systemd". Empty for v2.
	Controllers []string
}

// v1Controllers are the controller names that may appear in the super
// options of a v1 cgroup mount.
var v1Controllers = []string{
	"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb",
	"memory", "misc", "net_cls", "net_prio", "perf_event", "pids", "rdma",
}

// ParseMountInfo returns the cgroup and cgroup2 mounts listed in b, the
// contents of /proc/<pid>/mountinfo (proc(5)), in order. A malformed line
// is an error wrapping ErrParse.
func ParseMountInfo(b []byte) ([]Mount, error) {
	if len(b) > maxParseInput {
		return nil, fmt.Errorf("%w: mountinfo: %d bytes exceeds %d", ErrParse, len(b), maxParseInput)
	}
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxParseInput)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		// id parent maj:min root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("%w: mountinfo line %d: no separator", ErrParse, n)
		}
		f := strings.Fields(pre)
		if len(f) < 6 {
			return nil, fmt.Errorf("%w: mountinfo line %d: %d fields before separator, want at least 6", ErrParse, n, len(f))
		}
		p := strings.Fields(post)
		if len(p) < 3 {
			return nil, fmt.Errorf("%w: mountinfo line %d: %d fields after separator, want 3", ErrParse, n, len(p))
		}
		fstype := p[0]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		m := Mount{Root: unescapeMount(f[3]), Point: unescapeMount(f[4]), V2: fstype == "cgroup2"}
		if !path.IsAbs(m.Root) || !path.IsAbs(m.Point) {
			return nil, fmt.Errorf("%w: mountinfo line %d: relative path", ErrParse, n)
		}
		if !m.V2 {
			for _, o := range strings.Split(p[2], ",") {
				if slices.Contains(v1Controllers, o) || strings.HasPrefix(o, "name=") {
					m.Controllers = append(m.Controllers, o)
				}
			}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: mountinfo: %v", ErrParse, err)
	}
	return out, nil
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ProcCgroups is a process's membership, parsed from /proc/<pid>/cgroup.
type ProcCgroups struct {
	// V2 is the path in the unified hierarchy ("0::/path"); HasV2 says
	// whether that line was present.
	V2    string
	HasV2 bool
	// V1 maps each v1 controller (and "name=..." hierarchy) to its path.
	V1 map[string]string
}

// ParseProcCgroup parses b, the contents of /proc/<pid>/cgroup
// (cgroups(7)): lines of hierarchy-id:controller-list:path. Paths are
// cleaned. A malformed line is an error wrapping ErrParse.
func ParseProcCgroup(b []byte) (ProcCgroups, error) {
	pc := ProcCgroups{V1: map[string]string{}}
	if len(b) > maxParseInput {
		return pc, fmt.Errorf("%w: cgroup: %d bytes exceeds %d", ErrParse, len(b), maxParseInput)
	}
	for n, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return pc, fmt.Errorf("%w: cgroup line %d: want id:controllers:path", ErrParse, n+1)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return pc, fmt.Errorf("%w: cgroup line %d: hierarchy id %q", ErrParse, n+1, id)
		}
		if !path.IsAbs(p) {
			return pc, fmt.Errorf("%w: cgroup line %d: path %q is not absolute", ErrParse, n+1, p)
		}
		p = path.Clean(p)
		if id == "0" && ctrls == "" {
			pc.V2, pc.HasV2 = p, true
			continue
		}
		if ctrls == "" {
			return pc, fmt.Errorf("%w: cgroup line %d: v1 hierarchy without controllers", ErrParse, n+1)
		}
		for _, c := range strings.Split(ctrls, ",") {
			pc.V1[c] = p
		}
	}
	return pc, nil
}

// V2Path returns the v2 cgroup path in b, the contents of
// /proc/<pid>/cgroup: the path of its "0::" line. It returns an error
// wrapping ErrParse for malformed content and ErrNoV2 when there is no
// v2 line.
func V2Path(b []byte) (string, error) {
	pc, err := ParseProcCgroup(b)
	if err != nil {
		return "", err
	}
	if !pc.HasV2 {
		return "", ErrNoV2
	}
	return pc.V2, nil
}

// FindV2 returns the first cgroup2 mount in b, the contents of
// /proc/<pid>/mountinfo, or ErrNoV2 when there is none.
func FindV2(mountinfo []byte) (Mount, error) {
	ms, err := ParseMountInfo(mountinfo)
	if err != nil {
		return Mount{}, err
	}
	for _, m := range ms {
		if m.V2 {
			return m, nil
		}
	}
	return Mount{}, ErrNoV2
}

// ReadV2 returns the cgroup2 mount of this process's mount namespace, from
// /proc/self/mountinfo.
func ReadV2() (Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Mount{}, fmt.Errorf("reading mountinfo: %w", err)
	}
	return FindV2(b)
}

// Own returns this process's v2 cgroup path, from /proc/self/cgroup.
func Own() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading own cgroup: %w", err)
	}
	return V2Path(b)
}

// OwnDir returns the directory of this process's own v2 cgroup (ReadV2,
// Own and Dir together).
func OwnDir() (string, error) {
	m, err := ReadV2()
	if err != nil {
		return "", err
	}
	own, err := Own()
	if err != nil {
		return "", err
	}
	return m.Dir(own)
}

// Dir returns the directory of the cgroup at hierarchy path cg (as
// /proc/<pid>/cgroup names it) under mount m. It returns an error wrapping
// ErrOutside when m does not show cg (a mount rooted at /a shows neither
// /b nor /ab).
func (m Mount) Dir(cg string) (string, error) {
	root := path.Clean("/" + m.Root)
	cg = path.Clean("/" + cg)
	rest := cg
	switch {
	case root == "/":
	case cg == root:
		rest = "/"
	case strings.HasPrefix(cg, root+"/"):
		rest = strings.TrimPrefix(cg, root)
	default:
		return "", fmt.Errorf("%w: cgroup %s is outside the mounted root %s", ErrOutside, cg, root)
	}
	return filepath.Join(m.Point, filepath.FromSlash(rest)), nil
}

// Ancestors returns cg and each of its ancestors up to the mount's root,
// nearest first. A cg outside the mount's root runs up to "/".
func (m Mount) Ancestors(cg string) []string {
	cg = path.Clean("/" + cg)
	root := path.Clean("/" + m.Root)
	var out []string
	for {
		out = append(out, cg)
		if cg == root || cg == "/" {
			return out
		}
		cg = path.Dir(cg)
	}
}

// AncestorIDs returns the ids of the cgroup at cg and of its ancestors up
// to the mount's root, nearest first (see Ancestors and ID).
func (m Mount) AncestorIDs(cg string) ([]uint64, error) {
	anc := m.Ancestors(cg)
	ids := make([]uint64, 0, len(anc))
	for _, a := range anc {
		dir, err := m.Dir(a)
		if err != nil {
			return nil, err
		}
		id, err := ID(dir)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
