package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrNoCgroup2 is returned when the host has no cgroup v2 hierarchy, or a
// process is not in it.
var ErrNoCgroup2 = errors.New("server: no cgroup v2 hierarchy")

// Cgroup2 locates the cgroup v2 (unified) hierarchy: where it is mounted and
// which cgroup path the mount's root is.
type Cgroup2 struct {
	// Mount is the mount point, /sys/fs/cgroup on a pure v2 host and
	// usually /sys/fs/cgroup/unified on a hybrid one.
	Mount string
	// Root is the cgroup path at the mount's root ("/" unless the mount
	// was made inside a cgroup namespace).
	Root string
}

// FindCgroup2 reads /proc/self/mountinfo for the cgroup2 mount.
func FindCgroup2() (Cgroup2, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Cgroup2{}, fmt.Errorf("opening mountinfo: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo finds the first cgroup2 mount in mountinfo text.
func parseMountinfo(r io.Reader) (Cgroup2, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fstype, _, _ := strings.Cut(post, " ")
		if fstype != "cgroup2" {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		return Cgroup2{Mount: unescapeMount(f[4]), Root: unescapeMount(f[3])}, nil
	}
	if err := sc.Err(); err != nil {
		return Cgroup2{}, fmt.Errorf("reading mountinfo: %w", err)
	}
	return Cgroup2{}, ErrNoCgroup2
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			o := s[i+1 : i+4]
			if o[0] >= '0' && o[0] <= '3' && o[1] >= '0' && o[1] <= '7' && o[2] >= '0' && o[2] <= '7' {
				b.WriteByte((o[0]-'0')<<6 | (o[1]-'0')<<3 | (o[2] - '0'))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseProcCgroup returns the v2 path from /proc/<pid>/cgroup content: the
// line "0::/path".
func parseProcCgroup(b []byte) (string, error) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			s := string(p)
			if !strings.HasPrefix(s, "/") {
				return "", fmt.Errorf("%w: cgroup path %q is not absolute", ErrNoCgroup2, s)
			}
			return path.Clean(s), nil
		}
	}
	return "", ErrNoCgroup2
}

// Dir returns the directory of the cgroup at path cg (as /proc/<pid>/cgroup
// names it).
func (c Cgroup2) Dir(cg string) (string, error) {
	cg = path.Clean("/" + cg)
	root := path.Clean("/" + c.Root)
	rel := cg
	if root != "/" {
		if cg != root && !strings.HasPrefix(cg, root+"/") {
			return "", fmt.Errorf("%w: cgroup %s is outside the mounted root %s", ErrNoCgroup2, cg, root)
		}
		rel = strings.TrimPrefix(cg, root)
	}
	return filepath.Join(c.Mount, filepath.FromSlash(rel)), nil
}

// ancestors returns cg and each of its ancestors up to the mount's root,
// nearest first.
func (c Cgroup2) ancestors(cg string) []string {
	cg = path.Clean("/" + cg)
	root := path.Clean("/" + c.Root)
	var out []string
	for {
		out = append(out, cg)
		if cg == root || cg == "/" {
			return out
		}
		cg = path.Dir(cg)
	}
}
