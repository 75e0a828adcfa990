package apt

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The actions of a hook line that are not a .deb path.
const (
	ActionConfigure = "**CONFIGURE**"
	ActionRemove    = "**REMOVE**"
)

// ErrHook is wrapped by every error in a hook's input.
var ErrHook = errors.New("apt: bad Pre-Install-Pkgs input")

// maxHookLine bounds one line of the hook's input.
const maxHookLine = 1 << 20

// Hook is the input apt gives a DPkg::Pre-Install-Pkgs command of protocol
// version 3: the configuration, then one line per package.
type Hook struct {
	Version int
	// Config are the configuration lines ("APT::Architecture=amd64").
	Config []string
	Pkgs   []HookPkg
}

// HookPkg is one package line: name, the old version, architecture and
// multi-arch kind ("-" when not installed; the kind "none"), the
// comparison of the two versions (<, = or >), the new ones, and the action:
// a .deb path, ActionConfigure or ActionRemove.
type HookPkg struct {
	Name                       string
	OldVersion, OldArch, OldMA string
	Compare                    string
	NewVersion, NewArch, NewMA string
	Action                     string
}

// Deb reports whether the action is a .deb that dpkg is about to unpack.
func (p HookPkg) Deb() bool { return p.Action != ActionConfigure && p.Action != ActionRemove }

// ParseHook reads protocol version 3 (version 2 lines, without the
// architectures, are refused).
func ParseHook(r io.Reader) (*Hook, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxHookLine)
	if !sc.Scan() {
		return nil, fmt.Errorf("%w: empty", ErrHook)
	}
	v, ok := strings.CutPrefix(sc.Text(), "VERSION ")
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n != 3 {
		return nil, fmt.Errorf("%w: first line %q, want VERSION 3", ErrHook, sc.Text())
	}
	h := &Hook{Version: n}
	for sc.Scan() && sc.Text() != "" {
		h.Config = append(h.Config, sc.Text())
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 9 || f[0] == "" || !strings.Contains("<=>", f[4]) || len(f[4]) != 1 || f[8] == "" {
			return nil, fmt.Errorf("%w: package line %q", ErrHook, line)
		}
		h.Pkgs = append(h.Pkgs, HookPkg{Name: f[0], OldVersion: f[1], OldArch: f[2], OldMA: f[3], Compare: f[4],
			NewVersion: f[5], NewArch: f[6], NewMA: f[7], Action: f[8]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHook, err)
	}
	return h, nil
}

// HookRecord is what RunHook writes for one .deb: a JSON line.
type HookRecord struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	Deb     string `json:"deb"`
	SHA256  string `json:"sha256"`
}

// RunHook is the Pre-Install-Pkgs command: it parses the version 3 input
// on stdin, hashes each .deb it names (SHA-256, streamed) and appends one
// HookRecord line per .deb to the file out (created 0600, never through a
// symlink). An error makes the command exit non-zero, which aborts the
// install: a .deb that cannot be hashed is not installed unrecorded.
func RunHook(stdin io.Reader, out string) error {
	h, err := ParseHook(stdin)
	if err != nil {
		return err
	}
	// apt waits for the hook to read all of its input.
	io.Copy(io.Discard, stdin)
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return fmt.Errorf("opening the hook's output: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, p := range h.Pkgs {
		if !p.Deb() {
			continue
		}
		sum, err := hashFile(p.Action)
		if err != nil {
			f.Close()
			return err
		}
		if err := enc.Encode(HookRecord{Name: p.Name, Version: p.NewVersion, Arch: p.NewArch, Deb: p.Action, SHA256: sum}); err != nil {
			f.Close()
			return fmt.Errorf("writing the hook's output: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the hook's output: %w", err)
	}
	return nil
}

// ReadHookRecords reads the lines RunHook wrote.
func ReadHookRecords(r io.Reader) ([]HookRecord, error) {
	var out []HookRecord
	dec := json.NewDecoder(r)
	for {
		var rec HookRecord
		if err := dec.Decode(&rec); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading the hook's records: %w", err)
		}
		out = append(out, rec)
	}
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hashing a .deb: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
