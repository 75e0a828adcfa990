package listing

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/cargo"
)

// Errors of reading a crates sparse index.
var (
	// ErrBadCrateName: a crate name crates.io would not accept.
	ErrBadCrateName = errors.New("listing: invalid crate name")
	// ErrBadCrateConfig: an index's config.json that cannot be used.
	ErrBadCrateConfig = errors.New("listing: unusable crates index config.json")
)

// crates is the resolver's Cargo: its name check.
var crates, _ = resolver.Lookup(resolver.Cargo)

// CrateIndex is one file of a crates sparse index, as ParseCrateIndex
// reads it: one JSON object a line, one line a version. The mirror serves
// its valid lines byte for byte (Body[Start:End]) and verifies each .crate
// against its line's cksum; release reads versions, yanked status and
// pubtime from them.
type CrateIndex struct {
	// Name is the file's name: the crate's, lower case.
	Name string
	// Body is the file as the index served it.
	Body []byte
	// Lines are the valid lines, in the file's order.
	Lines []CrateLine
	// Bad counts the lines left out: those that do not parse, and every
	// line of a version listed more than once.
	Bad int
	// Err is why the first line left out was left out, naming its line
	// number; nil when Bad is 0.
	Err error
}

// CrateLine is one valid line of an index file.
type CrateLine struct {
	// Start and End delimit the line in the file's Body, without its
	// newline.
	Start, End int
	// Name is the crate's name as the line writes it (its case may differ
	// from the file's name).
	Name string
	// Vers is the version, a valid semver version.
	Vers string
	// Cksum is the sha256 of the .crate, in lower-case hex.
	Cksum string
	// Yanked: the crate's owners withdrew the version.
	Yanked bool
	// Published is the line's pubtime; zero when it has none (older
	// lines do not).
	Published time.Time
}

// crateLineJSON is the part of an index line that is read; the rest
// passes through as the index wrote it.
type crateLineJSON struct {
	Name    string `json:"name"`
	Vers    string `json:"vers"`
	Cksum   string `json:"cksum"`
	Yanked  bool   `json:"yanked"`
	Pubtime string `json:"pubtime"`
}

// errBlank marks a blank line, which is neither a version nor malformed.
var errBlank = errors.New("listing: blank line")

// ParseCrateIndex reads the index file of crate name (lower case). It never
// fails: a line that is not JSON, names another crate, has a version that
// is not semver, a cksum that is not sha256 hex or a pubtime that is not
// RFC 3339 is left out, and so is every line of a version listed more than
// once (build metadata aside, which cargo ignores); Bad counts them and Err
// says why the first was.
func ParseCrateIndex(name string, b []byte) *CrateIndex {
	idx := &CrateIndex{Name: name, Body: b}
	count := map[string]int{} // version without build metadata → lines
	for n, start := 1, 0; start < len(b); n++ {
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += start
		}
		l, err := parseCrateLine(name, b[start:end])
		switch {
		case errors.Is(err, errBlank):
		case err != nil:
			idx.leaveOut(fmt.Errorf("line %d: %w", n, err))
		default:
			l.Start, l.End = start, end
			idx.Lines = append(idx.Lines, l)
			count[withoutBuild(l.Vers)]++
		}
		start = end + 1
	}
	kept := idx.Lines[:0]
	for _, l := range idx.Lines {
		if c := count[withoutBuild(l.Vers)]; c > 1 {
			idx.leaveOut(fmt.Errorf("version %s is listed %d times", withoutBuild(l.Vers), c))
			continue
		}
		kept = append(kept, l)
	}
	idx.Lines = kept
	return idx
}

// leaveOut counts a line left out, for err.
func (idx *CrateIndex) leaveOut(err error) {
	idx.Bad++
	if idx.Err == nil {
		idx.Err = fmt.Errorf("the index file of %s: %w", idx.Name, err)
	}
}

// parseCrateLine reads one line of the index file of crate file.
func parseCrateLine(file string, raw []byte) (CrateLine, error) {
	raw = bytes.TrimRight(raw, "\r \t")
	if len(bytes.TrimSpace(raw)) == 0 {
		return CrateLine{}, errBlank
	}
	var r crateLineJSON
	if err := json.Unmarshal(raw, &r); err != nil {
		return CrateLine{}, err
	}
	if strings.ToLower(r.Name) != file || CheckCrateName(r.Name) != nil {
		return CrateLine{}, fmt.Errorf("the line names the crate %.120q", r.Name)
	}
	if _, err := cargo.ParseVersion(r.Vers); err != nil {
		return CrateLine{}, err
	}
	if b, err := hex.DecodeString(r.Cksum); err != nil || len(b) != 32 {
		return CrateLine{}, fmt.Errorf("%.120s: cksum %.120q is not a sha256 hex digest", r.Vers, r.Cksum)
	}
	l := CrateLine{Name: r.Name, Vers: r.Vers, Cksum: strings.ToLower(r.Cksum), Yanked: r.Yanked}
	if r.Pubtime != "" {
		var err error
		if l.Published, err = time.Parse(time.RFC3339, r.Pubtime); err != nil {
			return CrateLine{}, fmt.Errorf("%.120s: pubtime: %w", r.Vers, err)
		}
	}
	return l, nil
}

// withoutBuild is a version without its build metadata, which semver
// precedence (and so cargo) ignores.
func withoutBuild(v string) string {
	v, _, _ = strings.Cut(v, "+")
	return v
}

// maxCrateNameLen is crates.io's limit on a crate name.
const maxCrateNameLen = 64

// CheckCrateName accepts the crate names crates.io does: at most 64 ASCII
// letters, digits, - and _, beginning with a letter or a digit. It
// returns an error wrapping ErrBadCrateName.
func CheckCrateName(name string) error {
	if err := crates.CheckName(name); err != nil {
		return fmt.Errorf("%w %.120q: %w", ErrBadCrateName, name, err)
	}
	if len(name) > maxCrateNameLen {
		return fmt.Errorf("%w %.120q: longer than %d characters", ErrBadCrateName, name, maxCrateNameLen)
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '-' && c != '_')) {
			return fmt.Errorf("%w %.120q: want ASCII letters, digits, - and _, beginning with a letter or digit", ErrBadCrateName, name)
		}
	}
	return nil
}

// cratePrefix is the directory of name's index file, as cargo's {prefix}
// writes it: 1, 2, 3/<first character>, or <first two>/<next two>; "" for
// no name.
func cratePrefix(name string) string {
	switch len(name) {
	case 0:
		return ""
	case 1, 2:
		return fmt.Sprint(len(name))
	case 3:
		return "3/" + name[:1]
	}
	return name[:2] + "/" + name[2:4]
}

// CrateIndexPath is the path of name's index file beneath the index:
// the name in lower case, in its prefix directory (se/rd/serde).
func CrateIndexPath(name string) string {
	lower := strings.ToLower(name)
	return cratePrefix(lower) + "/" + lower
}

// CrateConfig is what is read of an index's config.json.
type CrateConfig struct {
	// DL is the download template of the index's crates.
	DL string `json:"dl"`
	// AuthRequired: every request needs a token.
	AuthRequired bool `json:"auth-required"`
}

// crateDLMarkers are the markers of a dl template; a template with none is
// a base URL to which cargo appends /{crate}/{version}/download.
var crateDLMarkers = []string{"{crate}", "{version}", "{prefix}", "{lowerprefix}", "{sha256-checksum}"}

// sampleCrates are the names a dl template is tried with: one whose
// expansions are hex digits, and one whose are not, so that a '%' before a
// marker, which makes an escape of some names and not of others, is
// refused.
var sampleCrates = []string{"abcd", "zz_z-"}

// ParseCrateConfig reads an index's config.json. It returns an error
// wrapping ErrBadCrateConfig when it is not JSON, has no dl, asks for
// authentication (which no reader here forwards), or its dl does not expand
// to an absolute http(s) URL.
func ParseCrateConfig(b []byte) (*CrateConfig, error) {
	var c CrateConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCrateConfig, err)
	}
	if c.AuthRequired {
		return nil, fmt.Errorf("%w: the index requires authentication, which sandtrail does not forward", ErrBadCrateConfig)
	}
	for _, name := range sampleCrates {
		u, err := url.Parse(CrateDownloadURL(c.DL, name, "1.0.0", strings.Repeat("0", 64)))
		if c.DL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: dl %.120q is not an http(s) URL template", ErrBadCrateConfig, c.DL)
		}
	}
	return &c, nil
}

// CrateDownloadURL expands a dl template for one version as cargo does:
// {crate}, {version}, {prefix}, {lowerprefix} and {sha256-checksum} (cksum)
// are replaced, and a template with none of them has
// /{crate}/{version}/download appended.
func CrateDownloadURL(dl, name, version, cksum string) string {
	has := false
	for _, m := range crateDLMarkers {
		has = has || strings.Contains(dl, m)
	}
	if !has {
		dl += "/{crate}/{version}/download"
	}
	return strings.NewReplacer("{crate}", name, "{version}", version, "{prefix}", cratePrefix(name),
		"{lowerprefix}", strings.ToLower(cratePrefix(name)), "{sha256-checksum}", cksum).Replace(dl)
}
