package broker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// DefaultDpkgStatus is dpkg's status file: every package dpkg knows, with
// its state.
const DefaultDpkgStatus = "/var/lib/dpkg/status"

// Bounds on a dpkg status file, which dpkg writes as root but whose
// fields come from the packages' control files.
const (
	// maxStatusLine bounds one line (a Description's line, a Conffiles
	// entry).
	maxStatusLine = 1 << 20
	// maxStatusPkgs bounds the packages read: a large system has a few
	// thousand.
	maxStatusPkgs = 200_000
)

// ErrStatus is wrapped by the errors of ReadStatus.
var ErrStatus = errors.New("broker: bad dpkg status")

// Installed is one package of dpkg's status: what is on disk.
type Installed struct {
	Name, Arch, Version string
	// State is the third word of the Status field: installed, unpacked,
	// half-configured, half-installed, config-files, not-installed,
	// triggers-awaited or triggers-pending.
	State string
}

// OnDisk reports whether the package's files are unpacked on disk, at
// Version: installed, or unpacked and not (yet, or not successfully)
// configured.
func (i Installed) OnDisk() bool {
	switch i.State {
	case "installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending":
		return true
	}
	return false
}

var (
	statusName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{0,127}$`)
	statusArch = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
)

// ReadStatus reads a dpkg status file (deb822 paragraphs: Package,
// Architecture, Version, Status; the other fields are skipped), streaming,
// into its packages by "name:arch". A paragraph whose fields do not read
// as a package's (a name or arch of the wrong characters, a version with
// blanks or of more than 256 bytes, a Status that is not three words) is
// skipped: it names nothing that can be claimed. A line longer than 1 MiB
// or more than 200,000 packages is an error wrapping ErrStatus.
func ReadStatus(r io.Reader) (map[string]Installed, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxStatusLine)
	out := map[string]Installed{}
	var cur Installed
	seen := false
	flush := func() error {
		if seen && validInstalled(cur) {
			if len(out) >= maxStatusPkgs {
				return fmt.Errorf("%w: more than %d packages", ErrStatus, maxStatusPkgs)
			}
			out[cur.Name+":"+cur.Arch] = cur
		}
		cur, seen = Installed{}, false
		return nil
	}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		seen = true
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation of a field not read
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			cur.Name = "" // not deb822: the paragraph names nothing
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "package":
			cur.Name = value
		case "architecture":
			cur.Arch = value
		case "version":
			cur.Version = value
		case "status":
			f := strings.Fields(value)
			if len(f) == 3 {
				cur.State = f[2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrStatus, maxStatusLine)
		}
		return nil, fmt.Errorf("reading dpkg's status: %w", err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// validInstalled reports whether a paragraph's fields read as a package.
func validInstalled(i Installed) bool {
	return statusName.MatchString(i.Name) && statusArch.MatchString(i.Arch) && i.Version != "" && len(i.Version) <= 256 &&
		!strings.ContainsAny(i.Version, " \t") && i.State != ""
}
