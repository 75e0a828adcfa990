package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandtrail/sandtrail/record/pkgview"
)

// WheelDirs are the directories of the wheels the machine's Python bundles
// for ensurepip, which `python3 -m venv` installs with no fetch: Debian's
// python3-pip-whl and python3-setuptools-whl, and CPython's own
// ensurepip/_bundled (a Python built from source, or another
// distribution's).
var WheelDirs = []string{
	"/usr/share/python-wheels",
	"/usr/lib/python3*/ensurepip/_bundled",
	"/usr/local/lib/python3*/ensurepip/_bundled",
}

// SystemWheels lists the wheels in the directories of globs (WheelDirs)
// that root alone could have put there: a directory root owns and no one
// else may write, a regular file root owns. Anything else, and a name that
// is no wheel's, is skipped, as is a directory that cannot be read: the
// list only exempts (pkgview.WithSystemWheels), so missing one costs an
// alert, never a hole.
func SystemWheels(globs ...string) []pkgview.SystemWheel {
	var out []pkgview.SystemWheel
	for _, g := range globs {
		dirs, _ := filepath.Glob(g)
		for _, d := range dirs {
			if rootOnly(d) != nil {
				continue
			}
			ents, err := os.ReadDir(d)
			if err != nil {
				continue
			}
			for _, ent := range ents {
				w, ok := wheelOf(ent.Name())
				if ok && rootsFile(filepath.Join(d, ent.Name())) {
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// rootsFile reports whether p is a regular file that root owns and no one
// else may write.
func rootsFile(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
}

// wheelOf reads a wheel's file name (PEP 427:
// NAME-VERSION[-BUILD]-PYTHON-ABI-PLATFORM.whl, with - escaped as _ in
// each part).
func wheelOf(file string) (pkgview.SystemWheel, bool) {
	base, ok := strings.CutSuffix(file, ".whl")
	if !ok {
		return pkgview.SystemWheel{}, false
	}
	parts := strings.Split(base, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return pkgview.SystemWheel{}, false
	}
	for _, p := range parts {
		if p == "" {
			return pkgview.SystemWheel{}, false
		}
	}
	return pkgview.SystemWheel{Name: parts[0], Version: parts[1]}, true
}
