package intel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/ecosystem"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Errors of ParseRecord: a record that is not kept, and why.
var (
	// ErrNotMalicious: the record's id is not a MAL- id (a vulnerability
	// advisory of an osv.dev export, GHSA-…, PYSEC-…).
	ErrNotMalicious = errors.New("intel: not a malicious-package (MAL-) record")
	// ErrStaging: a MAL-0000-… record, which the malicious-packages project
	// has not given an id yet.
	ErrStaging = errors.New("intel: a MAL-0000 staging record")
	// ErrNoPackage: no affected package is of an ecosystem sandtrail
	// records (Record.Other names the ones it has).
	ErrNoPackage = errors.New("intel: no affected package of an ecosystem sandtrail records")
	// ErrInvalid: the bytes are not an OSV record this package accepts.
	ErrInvalid = errors.New("intel: invalid OSV record")
)

// Limits on one record, which is untrusted input.
const (
	// MaxRecordSize bounds a record's JSON.
	MaxRecordSize = 1 << 20
	maxString     = 256     // an id, a name, a version, a domain
	maxText       = 8 << 10 // summary and details are clipped to it
	maxItems      = 10000   // versions of one package, events of a range, IOCs of a kind
)

// Record is one known-malicious package record: the parts of an OSV MAL-
// record that sandtrail uses.
type Record struct {
	// ID is the record's id: MAL-2025-1234.
	ID        string    `json:"id"`
	Modified  time.Time `json:"modified"`
	Published time.Time `json:"published,omitzero"`
	// Withdrawn is set when the record was withdrawn (a false positive):
	// importing it removes the record.
	Withdrawn time.Time `json:"withdrawn,omitzero"`
	Aliases   []string  `json:"aliases,omitempty"`
	Summary   string    `json:"summary,omitempty"`
	Details   string    `json:"details,omitempty"`
	// Affected are its packages of the ecosystems sandtrail records.
	Affected []Affected `json:"affected"`
	// Other are the OSV ecosystems of its other affected packages
	// (RubyGems, Go, …), which sandtrail does not record.
	Other []string `json:"other_ecosystems,omitempty"`
	// Origins are database_specific.malicious-packages-origins: who
	// reported it.
	Origins []Origin `json:"origins,omitempty"`
	IOCs    IOCs     `json:"iocs,omitzero"`
}

// Affected is one package a record lists, and which of its versions.
type Affected struct {
	// Ecosystem is sandtrail's name (the purl type): npm, pypi, cargo, deb.
	Ecosystem string `json:"ecosystem"`
	// Name is the name the record gives (affected[].package.name).
	Name string `json:"name"`
	// Versions lists affected versions exactly.
	Versions []string `json:"versions,omitempty"`
	// Ranges are its ECOSYSTEM and SEMVER ranges (GIT ranges, which name
	// commits, are left out).
	Ranges []Range `json:"ranges,omitempty"`
}

// Range is one OSV range: its events, in the order given.
type Range struct {
	Type   string       `json:"type"`
	Events []RangeEvent `json:"events"`
}

// RangeEvent is one event of a range; exactly one field is set.
type RangeEvent struct {
	Introduced   string `json:"introduced,omitempty"`
	Fixed        string `json:"fixed,omitempty"`
	LastAffected string `json:"last_affected,omitempty"`
	Limit        string `json:"limit,omitempty"`
}

// Origin is one entry of database_specific.malicious-packages-origins.
type Origin struct {
	Source     string `json:"source,omitempty"`
	ID         string `json:"id,omitempty"`
	SHA256     string `json:"sha256,omitempty"`
	ImportTime string `json:"import_time,omitempty"`
}

// IOCs are a record's indicators of compromise.
type IOCs struct {
	Domains []string `json:"domains,omitempty"`
	URLs    []string `json:"urls,omitempty"`
	IPs     []string `json:"ip_addresses,omitempty"`
	// SHA256 are file digests (iocs.files[].digests.sha256), lower-case
	// hex, matched against the artifact hashes the mirror recorded.
	SHA256 []string `json:"sha256,omitempty"`
}

// Every reports whether the package is listed at every version: a range
// whose one event is introduced "0", with no fix, last affected or limit.
func (a *Affected) Every() bool {
	for _, r := range a.Ranges {
		if len(r.Events) == 1 && r.Events[0].Introduced == "0" {
			return true
		}
	}
	return false
}

// Purl is the package's purl, at version when it is not empty.
func (a *Affected) Purl(version string) string { return purl.Of(a.Ecosystem, a.Name, version) }

// osvRecord is the OSV schema's shape, as far as it is read.
type osvRecord struct {
	ID        string   `json:"id"`
	Modified  string   `json:"modified"`
	Published string   `json:"published"`
	Withdrawn string   `json:"withdrawn"`
	Aliases   []string `json:"aliases"`
	Summary   string   `json:"summary"`
	Details   string   `json:"details"`
	Affected  []struct {
		Package struct {
			Ecosystem string `json:"ecosystem"`
			Name      string `json:"name"`
		} `json:"package"`
		Versions         []string        `json:"versions"`
		Ranges           []osvRange      `json:"ranges"`
		DatabaseSpecific osvDatabaseSpec `json:"database_specific"`
	} `json:"affected"`
	DatabaseSpecific osvDatabaseSpec `json:"database_specific"`
}

type osvRange struct {
	Type   string       `json:"type"`
	Events []RangeEvent `json:"events"`
}

type osvDatabaseSpec struct {
	Origins []Origin `json:"malicious-packages-origins"`
	IOCs    *osvIOCs `json:"iocs"`
}

// osvIOCs takes both spellings of the addresses seen in the project's
// records (ip_addresses, ips).
type osvIOCs struct {
	Domains     []string `json:"domains"`
	URLs        []string `json:"urls"`
	IPAddresses []string `json:"ip_addresses"`
	IPs         []string `json:"ips"`
	Files       []struct {
		Digests struct {
			SHA256 string `json:"sha256"`
		} `json:"digests"`
	} `json:"files"`
}

var (
	idRe      = regexp.MustCompile(`^[A-Z]+-[0-9A-Za-z._-]+$`)
	stagingRe = regexp.MustCompile(`^MAL-0000-`)
	sha256Re  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ParseRecord reads one OSV record. It returns the record with an error
// wrapping ErrNotMalicious, ErrStaging or ErrNoPackage when it is not one
// to keep (Record then holds its id and, for ErrNoPackage, Other), and an
// error wrapping ErrInvalid when b is not an OSV record at all: not JSON,
// over MaxRecordSize, no or a malformed id, a malformed time, a range
// event that does not set exactly one field. Affected packages of
// ecosystems sandtrail does not record, and names their ecosystem refuses,
// are left out; IOCs that are not domains, http(s) URLs, IP addresses or
// sha256 digests are dropped.
func ParseRecord(b []byte) (*Record, error) {
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(b), MaxRecordSize)
	}
	var o osvRecord
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&o); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(o.ID) > maxString || !idRe.MatchString(o.ID) {
		return nil, fmt.Errorf("%w: id %q", ErrInvalid, event.Cut(o.ID, 64))
	}
	r := &Record{ID: o.ID, Summary: event.Cut(o.Summary, maxText), Details: event.Cut(o.Details, maxText)}
	if err := parseTimes(r, &o); err != nil {
		return r, err
	}
	switch {
	case stagingRe.MatchString(o.ID):
		return r, ErrStaging
	case !strings.HasPrefix(o.ID, "MAL-"):
		return r, ErrNotMalicious
	}
	for _, a := range o.Aliases {
		if len(a) <= maxString && idRe.MatchString(a) && len(r.Aliases) < maxItems {
			r.Aliases = append(r.Aliases, a)
		}
	}
	if err := parseAffected(r, &o); err != nil {
		return r, err
	}
	r.Origins = clipOrigins(o.DatabaseSpecific.Origins)
	addIOCs(&r.IOCs, o.DatabaseSpecific.IOCs)
	for _, a := range o.Affected {
		addIOCs(&r.IOCs, a.DatabaseSpecific.IOCs)
	}
	if len(r.Affected) == 0 {
		return r, ErrNoPackage
	}
	return r, nil
}

func parseTimes(r *Record, o *osvRecord) error {
	for _, t := range []struct {
		raw      string
		dst      *time.Time
		required bool
	}{{o.Modified, &r.Modified, true}, {o.Published, &r.Published, false}, {o.Withdrawn, &r.Withdrawn, false}} {
		if t.raw == "" && !t.required {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.raw)
		if err != nil {
			return fmt.Errorf("%w: %s: time %q", ErrInvalid, r.ID, event.Cut(t.raw, 64))
		}
		*t.dst = v.UTC()
	}
	return nil
}

// parseAffected keeps the affected packages of the ecosystems sandtrail
// records, with valid names, mapped to sandtrail's ecosystem names through
// the one registry (ecosystem.FromOSV).
func parseAffected(r *Record, o *osvRecord) error {
	for _, a := range o.Affected {
		info, ok := ecosystem.FromOSV(a.Package.Ecosystem)
		if !ok {
			if e := event.Cut(a.Package.Ecosystem, 64); e != "" && !slices.Contains(r.Other, e) && len(r.Other) < 64 {
				r.Other = append(r.Other, e)
			}
			continue
		}
		eco, err := resolver.Lookup(info.Name)
		if err != nil || eco.CheckName(a.Package.Name) != nil {
			continue
		}
		af := Affected{Ecosystem: info.Name, Name: a.Package.Name}
		for _, v := range a.Versions {
			if v != "" && len(v) <= maxString && len(af.Versions) < maxItems {
				af.Versions = append(af.Versions, v)
			}
		}
		for _, rg := range a.Ranges {
			kept, err := parseRange(r.ID, rg)
			if err != nil {
				return err
			}
			if kept != nil {
				af.Ranges = append(af.Ranges, *kept)
			}
		}
		if len(af.Versions) > 0 || len(af.Ranges) > 0 {
			r.Affected = append(r.Affected, af)
		}
	}
	return nil
}

// parseRange checks a range; it returns nil for a GIT range, or any other
// type than ECOSYSTEM and SEMVER.
func parseRange(id string, rg osvRange) (*Range, error) {
	if rg.Type != "ECOSYSTEM" && rg.Type != "SEMVER" {
		return nil, nil
	}
	if len(rg.Events) == 0 || len(rg.Events) > maxItems {
		return nil, fmt.Errorf("%w: %s: a range with %d events", ErrInvalid, id, len(rg.Events))
	}
	for _, ev := range rg.Events {
		n := 0
		for _, v := range []string{ev.Introduced, ev.Fixed, ev.LastAffected, ev.Limit} {
			if v != "" {
				n++
				if len(v) > maxString {
					return nil, fmt.Errorf("%w: %s: a range event's version is longer than %d bytes", ErrInvalid, id, maxString)
				}
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("%w: %s: a range event sets %d of introduced, fixed, last_affected and limit, want one", ErrInvalid, id, n)
		}
	}
	return &Range{Type: rg.Type, Events: slices.Clone(rg.Events)}, nil
}

func clipOrigins(in []Origin) []Origin {
	var out []Origin
	for _, o := range in {
		if len(out) == 64 {
			break
		}
		out = append(out, Origin{Source: event.Cut(o.Source, maxString), ID: event.Cut(o.ID, maxString),
			SHA256: event.Cut(o.SHA256, 64), ImportTime: event.Cut(o.ImportTime, 64)})
	}
	return out
}

// addIOCs adds the indicators of in that are well formed, normalized:
// domains lower case without a trailing dot, URLs with a host, addresses
// as netip writes them, digests as lower-case hex.
func addIOCs(dst *IOCs, in *osvIOCs) {
	if in == nil {
		return
	}
	for _, d := range in.Domains {
		if n, ok := normalizeDomain(d); ok {
			dst.Domains = addOnce(dst.Domains, n)
		}
	}
	for _, raw := range in.URLs {
		if u, err := url.Parse(raw); err == nil && len(raw) <= 2048 && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "" {
			dst.URLs = addOnce(dst.URLs, raw)
		}
	}
	for _, ip := range append(slices.Clone(in.IPAddresses), in.IPs...) {
		if a, err := netip.ParseAddr(ip); err == nil {
			dst.IPs = addOnce(dst.IPs, a.Unmap().String())
		}
	}
	for _, f := range in.Files {
		if h := strings.ToLower(f.Digests.SHA256); sha256Re.MatchString(h) {
			dst.SHA256 = addOnce(dst.SHA256, h)
		}
	}
}

var domainRe = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)+$`)

// normalizeDomain is d lower case without a trailing dot, if it is a
// domain name of at least two labels.
func normalizeDomain(d string) (string, bool) {
	n := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	if len(n) > 253 || !domainRe.MatchString(n) {
		return "", false
	}
	return n, true
}

func addOnce(list []string, v string) []string {
	if len(list) >= maxItems || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
