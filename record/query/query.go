// Package query defines the filter of the sandtrail incident questions and
// its parsing from command-line strings.
//
// A Filter selects events: every field that is set must hold for an event
// to match. The index (record/index) answers a Filter with its indexes; the
// matching helpers here (PathMatch.Match, DomainMatch.Match,
// PackageMatch.MatchVersion) are the one definition of what each filter
// means, used both by the index and by its tests.
//
// Parse turns the strings of the CLI flags into a Filter. Its input is
// untrusted (an operator may paste anything), so every value is checked,
// and an error names the flag and says what was expected. Errors wrap
// ErrBadFilter.
package query

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// ErrBadFilter is wrapped by every error Parse returns.
var ErrBadFilter = errors.New("query: bad filter")

// Filter selects events. The zero Filter matches every event.
type Filter struct {
	// Session is one session id; empty means any session.
	Session string
	// Since and Until bound the event time: Since <= ts < Until. A zero
	// time leaves that side open.
	Since, Until time.Time
	// Kinds are alternatives: an event matches when its kind matches any.
	Kinds []Kind
	// Path matches file events by path (or new path, for a rename).
	Path *PathMatch
	// Domain matches net events by domain (a connect's domain or a DNS
	// query name).
	Domain *DomainMatch
	// Package matches pkg events by ecosystem, name and version.
	Package *PackageMatch
	// Reason keeps the events of sessions that ended (session.terminate)
	// with this reason.
	Reason string
	// Pid keeps events whose process id is Pid; 0 means any.
	Pid int32
	// Limit caps the number of results; 0 means no cap.
	Limit int
}

// Kind matches an event kind exactly, or by prefix.
type Kind struct {
	// Name is the exact kind, or the prefix ("file.") when Prefix is set.
	Name   string
	Prefix bool
}

// Match reports whether kind matches k.
func (k Kind) Match(kind string) bool {
	if k.Prefix {
		return strings.HasPrefix(kind, k.Name)
	}
	return kind == k.Name
}

// String returns k as it would be written on the command line.
func (k Kind) String() string {
	if k.Prefix {
		return k.Name + "*"
	}
	return k.Name
}

// MatchKinds reports whether kind matches any of ks; no ks matches all.
func MatchKinds(ks []Kind, kind string) bool {
	if len(ks) == 0 {
		return true
	}
	for _, k := range ks {
		if k.Match(kind) {
			return true
		}
	}
	return false
}

// Args holds the raw strings of the filter flags, as typed. Empty means
// "not given".
type Args struct {
	Session, Since, Until, Kind, Path, Domain, Package, Reason, Pid, Limit string
}

// Parse builds a Filter from a, resolving relative times ("2h") against
// now. Errors wrap ErrBadFilter and name the flag.
func Parse(a Args, now time.Time) (Filter, error) {
	var f Filter
	var err error
	if a.Session != "" {
		if f.Session, err = ParseSession(a.Session); err != nil {
			return Filter{}, err
		}
	}
	if a.Since != "" {
		if f.Since, err = ParseTime(a.Since, now); err != nil {
			return Filter{}, flagErr("--since", err)
		}
	}
	if a.Until != "" {
		if f.Until, err = ParseTime(a.Until, now); err != nil {
			return Filter{}, flagErr("--until", err)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return Filter{}, fmt.Errorf("%w: --since %s is not before --until %s", ErrBadFilter,
			f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano))
	}
	if a.Kind != "" {
		if f.Kinds, err = ParseKinds(a.Kind); err != nil {
			return Filter{}, err
		}
	}
	if a.Path != "" {
		if f.Path, err = ParsePath(a.Path); err != nil {
			return Filter{}, err
		}
	}
	if a.Domain != "" {
		if f.Domain, err = ParseDomain(a.Domain); err != nil {
			return Filter{}, err
		}
	}
	if a.Package != "" {
		if f.Package, err = ParsePackage(a.Package); err != nil {
			return Filter{}, err
		}
	}
	if a.Reason != "" {
		if f.Reason, err = ParseReason(a.Reason); err != nil {
			return Filter{}, err
		}
	}
	if a.Pid != "" {
		n, err := strconv.ParseInt(a.Pid, 10, 32)
		if err != nil || n <= 0 {
			return Filter{}, fmt.Errorf("%w: --pid %q: want a process id, a positive integer", ErrBadFilter, event.Clip(a.Pid, 80))
		}
		f.Pid = int32(n)
	}
	if a.Limit != "" {
		n, err := strconv.ParseInt(a.Limit, 10, 32)
		if err != nil || n < 0 {
			return Filter{}, fmt.Errorf("%w: --limit %q: want a count, 0 or more (0 means no limit)", ErrBadFilter, event.Clip(a.Limit, 80))
		}
		f.Limit = int(n)
	}
	if err := f.Validate(); err != nil {
		return Filter{}, err
	}
	return f, nil
}

// Validate checks the combination of fields. Path, Domain and Package each
// select a different kind of event (file, net, pkg), so at most one of
// them may be set; a kind list that excludes the events they select is
// also an error rather than a silent empty answer.
func (f *Filter) Validate() error {
	var set []string
	if f.Path != nil {
		set = append(set, "--path")
	}
	if f.Domain != nil {
		set = append(set, "--domain")
	}
	if f.Package != nil {
		set = append(set, "--package")
	}
	if len(set) > 1 {
		return fmt.Errorf("%w: %s select different kinds of event (file, net, pkg); give one of them", ErrBadFilter, strings.Join(set, " and "))
	}
	if len(set) == 1 && len(f.Kinds) > 0 {
		cat := map[string]string{"--path": "file.", "--domain": "net.", "--package": "pkg."}[set[0]]
		ok := false
		for _, k := range f.Kinds {
			if strings.HasPrefix(k.Name, cat) || (k.Prefix && strings.HasPrefix(cat, k.Name)) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("%w: %s only matches %s* events, which --kind excludes", ErrBadFilter, set[0], cat)
		}
	}
	return nil
}

func flagErr(flag string, err error) error {
	return fmt.Errorf("%w: %s %v", ErrBadFilter, flag, err)
}

// ParseSession checks a session id: non-empty, at most 128 bytes, no
// control characters or spaces.
func ParseSession(s string) (string, error) {
	if s == "" || len(s) > 128 || strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return "", fmt.Errorf("%w: --session %q: want a session id (1 to 128 bytes, no spaces)", ErrBadFilter, event.Clip(s, 80))
	}
	return s, nil
}

var relRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h|d|w)$`)

// ParseTime reads an absolute time (RFC 3339, or a date YYYY-MM-DD in UTC)
// or a relative one ("90s", "30m", "2h", "7d", "2w", "1h30m") meaning that
// long before now.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	if d, ok := parseRelative(s); ok {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want RFC 3339 (2026-11-29T08:00:00Z), a date (2026-11-29) or a duration before now (30m, 2h, 7d)", event.Clip(s, 80))
}

func parseRelative(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	if m := relRe.FindStringSubmatch(s); m != nil && (m[2] == "d" || m[2] == "w") {
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, false
		}
		unit := 24 * time.Hour
		if m[2] == "w" {
			unit *= 7
		}
		// A bound keeps the product inside time.Duration (about 292 years).
		if n <= 0 || n > 100*365 {
			return 0, false
		}
		return time.Duration(n * float64(unit)), true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// ParseKinds reads a comma-separated list of kinds. "file.read" is exact;
// "file." and "file.*" are prefixes; a bare category ("file") means the
// whole category. The category must be known (event.Categories).
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	cats := event.Categories()
	for _, part := range strings.Split(s, ",") {
		p := strings.TrimSpace(part)
		bad := func(why string) error {
			return fmt.Errorf("%w: --kind %q: %s", ErrBadFilter, event.Clip(p, 80), why)
		}
		if p == "" {
			return nil, fmt.Errorf("%w: --kind %q: empty entry in the list", ErrBadFilter, event.Clip(s, 80))
		}
		if len(p) > 64 || strings.ContainsFunc(p, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '*' || r == '-')
		}) {
			return nil, bad("want category.op, category. or category.* (lowercase)")
		}
		var k Kind
		switch {
		case strings.HasSuffix(p, ".*"):
			k = Kind{Name: strings.TrimSuffix(p, "*"), Prefix: true}
		case strings.HasSuffix(p, "*"):
			k = Kind{Name: strings.TrimSuffix(p, "*"), Prefix: true}
		case strings.HasSuffix(p, "."):
			k = Kind{Name: p, Prefix: true}
		case !strings.Contains(p, "."):
			k = Kind{Name: p + ".", Prefix: true}
			if p == "alert" {
				k = Kind{Name: p}
			}
		default:
			k = Kind{Name: p}
		}
		if strings.Contains(k.Name, "*") {
			return nil, bad("* is only allowed at the end")
		}
		cat, _, _ := strings.Cut(k.Name, ".")
		if !slices.Contains(cats, cat) {
			return nil, bad(fmt.Sprintf("unknown category %q (want one of %s)", cat, strings.Join(cats, ", ")))
		}
		out = append(out, k)
	}
	return out, nil
}

// ParseReason checks a session end reason: a lowercase word such as
// normal, timeout, oom, api, policy_violation, signal or host_lost.
func ParseReason(s string) (string, error) {
	if len(s) > 64 || strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) || s == "" {
		return "", fmt.Errorf("%w: --reason %q: want a lowercase end reason (normal, timeout, oom, api, policy_violation, signal, host_lost)", ErrBadFilter, event.Clip(s, 80))
	}
	return s, nil
}
