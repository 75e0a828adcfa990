package intel

import (
	"cmp"
	"context"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// What a Finding matched.
const (
	// MatchPackage: a pkg.install, or a pkg.fetch the mirror served, of a
	// listed name@version.
	MatchPackage = "package"
	// MatchHash: a pkg event whose artifact hash a record's IOCs name.
	MatchHash = "hash"
	// MatchDomain: a lookup of, or a connection to, a record's domain or
	// a sub-domain of it (a URL's host counts as a domain).
	MatchDomain = "domain"
	// MatchIP: a connection to a record's address.
	MatchIP = "ip"
	// MatchURL: a pkg event whose source URL is a record's URL.
	MatchURL = "url"
)

// Finding is one session's match of one record: the events that matched
// the same thing.
type Finding struct {
	SessionID string `json:"session_id"`
	Advisory  string `json:"advisory"`
	// Match is MatchPackage, MatchHash, MatchDomain, MatchIP or MatchURL.
	Match string `json:"match"`
	// Package is the purl of the listed package, its name as the
	// ecosystem compares names: with the version the session got for a
	// package or hash match, without a version for an indicator the
	// record names.
	Package   string `json:"package"`
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version,omitempty"`
	// IOC is the indicator that matched (a domain, an address, a URL, a
	// digest); empty for a package match.
	IOC string `json:"ioc,omitempty"`
	// Seqs are the matching events, in order; Kinds their kinds, each
	// once.
	Seqs  []uint64  `json:"seqs"`
	Kinds []string  `json:"kinds"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// Summary is the record's summary.
	Summary string `json:"summary,omitempty"`
}

// key is what one Finding gathers events by.
func (f *Finding) key() string {
	return f.SessionID + "\x00" + f.Advisory + "\x00" + f.Match + "\x00" + f.Package + "\x00" + f.IOC
}

// hunt gathers findings.
type hunt struct {
	ctx   context.Context
	s     *Store
	ix    *index.Index
	since time.Time
	found map[string]*Finding
	// records caches the records findings name, read once each.
	records map[string]*Record
}

// record returns the stored record id, read once per hunt; nil when the
// store no longer has it.
func (h *hunt) record(id string) *Record {
	if r, ok := h.records[id]; ok {
		return r
	}
	var rp *Record
	if r, ok, err := h.s.Record(h.ctx, id); err == nil && ok {
		rp = &r
	}
	h.records[id] = rp
	return rp
}

// Hunt searches the index for the sessions that match the store's records
// at or after since (zero: the whole record): the pkg.install events, and
// the pkg.fetch events the mirror served, of a listed name@version; pkg
// events whose hash or source URL a record's IOCs name; net events that
// look up or connect to a record's domains (or a sub-domain, or a URL's
// host) or addresses. It answers from the store as it is now: a withdrawn
// record matches nothing. Findings are ordered by session, then time.
func Hunt(ctx context.Context, s *Store, ix *index.Index, since time.Time) ([]Finding, error) {
	h := &hunt{ctx: ctx, s: s, ix: ix, since: since, found: map[string]*Finding{}, records: map[string]*Record{}}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := h.packages(); err != nil {
		return nil, err
	}
	iocs := s.IOCs()
	if err := h.artifacts(iocs); err != nil {
		return nil, err
	}
	if err := h.network(iocs); err != nil {
		return nil, err
	}
	out := make([]Finding, 0, len(h.found))
	for _, f := range h.found {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(strings.Compare(a.SessionID, b.SessionID), a.First.Compare(b.First), strings.Compare(a.key(), b.key()))
	})
	return out, nil
}

// add records that hit matched f's record and thing.
func (h *hunt) add(f Finding, hit index.Hit) {
	f.SessionID = hit.SessionID
	k := f.key()
	got := h.found[k]
	if got == nil {
		if r := h.record(f.Advisory); r != nil {
			f.Summary = r.Summary
		}
		f.First, f.Seqs, f.Kinds = hit.TS, nil, nil
		got = &f
		h.found[k] = got
	}
	if !slices.Contains(got.Seqs, hit.Seq) {
		got.Seqs = append(got.Seqs, hit.Seq)
		slices.Sort(got.Seqs)
	}
	if !slices.Contains(got.Kinds, hit.Kind) {
		got.Kinds = append(got.Kinds, hit.Kind)
	}
	got.First, got.Last = minTime(got.First, hit.TS), maxTime(got.Last, hit.TS)
}

// packages finds the listed versions among the index's distinct packages,
// then their install and fetch events.
func (h *hunt) packages() error {
	listed := map[int64]index.PackageKey{}
	advisories := map[int64][]string{}
	err := h.ix.EachPackage(h.ctx, func(k index.PackageKey) error {
		if ids := h.s.LookupIDs(k.Ecosystem, k.Name, k.Version); len(ids) > 0 {
			listed[k.ID], advisories[k.ID] = k, ids
		}
		return nil
	})
	if err != nil || len(listed) == 0 {
		return err
	}
	ids := make([]int64, 0, len(listed))
	byKey := map[string]index.PackageKey{}
	for id, k := range listed {
		ids = append(ids, id)
		byKey[k.Ecosystem+"\x00"+k.Name+"\x00"+k.Version] = k
	}
	slices.Sort(ids)
	return h.ix.PackageEvents(h.ctx, ids, h.since, func(hit index.Hit) error {
		e, err := hit.Event()
		if err != nil || e.Pkg == nil || !installed(e) {
			return nil
		}
		eco := strings.ToLower(e.Pkg.Ecosystem)
		k, ok := byKey[eco+"\x00"+resolver.NormalizeName(eco, e.Pkg.Name)+"\x00"+e.Pkg.Resolved]
		if !ok {
			return nil
		}
		for _, adv := range advisories[k.ID] {
			h.add(Finding{Advisory: adv, Match: MatchPackage, Ecosystem: k.Ecosystem, Name: e.Pkg.Name,
				Version: k.Version, Package: purl.Of(k.Ecosystem, k.Name, k.Version)}, hit)
		}
		return nil
	})
}

// installed reports whether a pkg event says the session got the package:
// a pkg.install, or a pkg.fetch that the mirror served (not one it
// refused).
func installed(e *event.Event) bool {
	if e.Kind == event.KindPkgFetch {
		return e.Pkg.Outcome == "" || e.Pkg.Outcome == "served"
	}
	return e.Kind == event.KindPkgInstall
}

// artifacts matches the pkg events' hashes and source URLs against the
// records' digests and URLs, when the records carry any.
func (h *hunt) artifacts(iocs []IOC) error {
	urls := map[string][]string{}
	hashes := 0
	for _, i := range iocs {
		switch i.Kind {
		case IOCURL:
			urls[i.Value] = append(urls[i.Value], i.Advisory)
		case IOCSHA256:
			hashes++
		}
	}
	if hashes == 0 && len(urls) == 0 {
		return nil
	}
	kinds := []query.Kind{{Name: event.KindPkgInstall}, {Name: event.KindPkgFetch}}
	return h.ix.Each(h.ctx, query.Filter{Kinds: kinds, Since: h.since}, func(hit index.Hit) error {
		e, err := hit.Event()
		if err != nil || e.Pkg == nil || !installed(e) {
			return nil
		}
		p := e.Pkg
		if hashes > 0 && strings.HasPrefix(p.Hash, "sha256:") {
			for _, r := range h.s.LookupHash(p.Hash) {
				eco := strings.ToLower(p.Ecosystem)
				h.add(Finding{Advisory: r.ID, Match: MatchHash, Ecosystem: eco, Name: p.Name, Version: p.Resolved,
					Package: canonicalPurl(eco, p.Name, p.Resolved), IOC: strings.TrimPrefix(p.Hash, "sha256:")}, hit)
			}
		}
		for _, adv := range urls[p.SourceURL] {
			h.add(h.iocFinding(adv, MatchURL, p.SourceURL), hit)
		}
		return nil
	})
}

// network matches lookups and connections against the records' domains,
// addresses and URL hosts.
func (h *hunt) network(iocs []IOC) error {
	domains, ips := map[string][]IOC{}, map[string][]IOC{}
	for _, i := range iocs {
		switch i.Kind {
		case IOCDomain:
			domains[i.Value] = append(domains[i.Value], i)
		case IOCIP:
			ips[i.Value] = append(ips[i.Value], i)
		case IOCURL:
			if u, err := url.Parse(i.Value); err == nil {
				host := strings.ToLower(u.Hostname())
				if a, err := netip.ParseAddr(host); err == nil {
					ips[a.Unmap().String()] = append(ips[a.Unmap().String()], i)
				} else if d, ok := normalizeDomain(host); ok {
					domains[d] = append(domains[d], i)
				}
			}
		}
	}
	if err := h.domains(domains); err != nil {
		return err
	}
	return h.addresses(ips)
}

// matchOf is the Match of a finding of i: a URL's host matches as the URL.
func matchOf(i IOC, as string) string {
	if i.Kind == IOCURL {
		return MatchURL
	}
	return as
}

func (h *hunt) domains(domains map[string][]IOC) error {
	if len(domains) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(domains))
	return h.ix.DomainEvents(h.ctx, names, h.since, func(hit index.Hit) error {
		e, err := hit.Event()
		if err != nil || e.Net == nil {
			return nil
		}
		seen := []string{e.Net.Domain}
		if e.Net.DNS != nil {
			seen = append(seen, e.Net.DNS.Query)
		}
		for _, s := range seen {
			s = query.NormalizeDomain(s)
			for _, d := range names {
				if s == d || strings.HasSuffix(s, "."+d) {
					for _, i := range domains[d] {
						h.add(h.iocFinding(i.Advisory, matchOf(i, MatchDomain), i.Value), hit)
					}
				}
			}
		}
		return nil
	})
}

func (h *hunt) addresses(ips map[string][]IOC) error {
	if len(ips) == 0 {
		return nil
	}
	return h.ix.AddressEvents(h.ctx, slices.Sorted(maps.Keys(ips)), h.since, func(hit index.Hit) error {
		e, err := hit.Event()
		if err != nil || e.Net == nil {
			return nil
		}
		a, err := netip.ParseAddr(e.Net.DstIP)
		if err != nil {
			return nil
		}
		ip := a.Unmap().String()
		for _, i := range ips[ip] {
			h.add(h.iocFinding(i.Advisory, matchOf(i, MatchIP), i.Value), hit)
		}
		return nil
	})
}

// iocFinding is a finding of an indicator of record adv, named by the
// record's first package.
func (h *hunt) iocFinding(adv, match, ioc string) Finding {
	f := Finding{Advisory: adv, Match: match, IOC: ioc}
	if r := h.record(adv); r != nil && len(r.Affected) > 0 {
		a := r.Affected[0]
		f.Ecosystem, f.Name, f.Package = a.Ecosystem, a.Name, canonicalPurl(a.Ecosystem, a.Name, "")
	}
	return f
}

// canonicalPurl is the purl of a package with its name as the ecosystem
// compares names, so that two spellings of one package (pip's Tiny_Pkg, the
// mirror's tiny-pkg) make one finding and one alert.
func canonicalPurl(eco, name, version string) string {
	return purl.Of(eco, resolver.NormalizeName(eco, name), version)
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
