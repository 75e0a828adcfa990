package index

import (
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Keys are what a store keeps of one event beside its envelope, for the
// questions: the paths it named, the domains (reversed) and address of a
// net event, its package. Both stores, this index and the central one,
// derive them here.
type Keys struct {
	Paths []string
	// Net is set for a net event, which has a row even with no domain.
	Net     bool
	Domains []string
	IP      string
	Port    int64
	// Package is set for a pkg event that names one (its ID is 0);
	// Purl is the event's purl, if any.
	Package *PackageKey
	Purl    string
}

// KeysOf derives the keys of ev.
func KeysOf(ev *event.Event) Keys {
	var k Keys
	if f := ev.File; f != nil {
		for i, p := range []string{f.Path, f.NewPath} {
			if p != "" && (i == 0 || p != f.Path) {
				k.Paths = append(k.Paths, p)
			}
		}
	}
	if n := ev.Net; n != nil {
		k.Net, k.IP, k.Port = true, n.DstIP, int64(n.DstPort)
		if d := query.NormalizeDomain(n.Domain); d != "" {
			k.Domains = append(k.Domains, d)
		}
		if n.DNS != nil {
			if d := query.NormalizeDomain(n.DNS.Query); d != "" && (len(k.Domains) == 0 || k.Domains[0] != d) {
				k.Domains = append(k.Domains, d)
			}
		}
		for i, d := range k.Domains {
			k.Domains[i] = query.ReverseDomain(d)
		}
	}
	if p := ev.Pkg; p != nil {
		eco, name, version := strings.ToLower(p.Ecosystem), p.Name, p.Resolved
		if (eco == "" || name == "") && p.Purl != "" {
			if pu, err := purl.Parse(p.Purl); err == nil {
				if e, n, err := resolver.FromPurl(pu); err == nil {
					eco, name = e.Name(), n
					if version == "" {
						version = pu.Version
					}
				}
			}
		}
		if eco != "" && name != "" {
			k.Package = &PackageKey{Ecosystem: eco, Name: resolver.NormalizeName(eco, name), Version: version}
			k.Purl = p.Purl
		}
	}
	return k
}

// Summary accumulates changes to one session's summary (its row of the
// sessions table) from the events added in one batch.
type Summary struct {
	First, Last                              int64
	Events, Procs, Files, Nets, Pkgs, Alerts int64
	// Lost sums the counts of its loss events.
	Lost int64
	// Ended is set by a session.terminate; EndTS, EndReason and
	// ExitStatus are the latest one's.
	Ended      bool
	EndTS      int64
	EndReason  string
	ExitStatus *int32
}

// Add counts ev, at ts (unix nanoseconds), in s.
func (s *Summary) Add(ev *event.Event, ts int64) {
	if s.Events == 0 {
		s.First, s.Last = ts, ts
	}
	s.First, s.Last = min(s.First, ts), max(s.Last, ts)
	s.Events++
	switch ev.Category() {
	case "process":
		s.Procs++
	case "file":
		s.Files++
	case "net":
		s.Nets++
	case "pkg":
		s.Pkgs++
	case "alert":
		s.Alerts++
	}
	if ev.Loss != nil {
		s.Lost += int64(ev.Loss.Count)
	}
	if ev.Session != nil && (ev.Kind == event.KindSessionTerminate || ev.Session.Op == "terminate") {
		if !s.Ended || ts >= s.EndTS {
			s.Ended, s.EndTS, s.EndReason, s.ExitStatus = true, ts, ev.Session.Reason, ev.Session.ExitStatus
		}
	}
}
