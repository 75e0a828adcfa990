package intel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/query"
)

// Rule is the name of the check and of the alert rule: the mirror's
// refusals (pkg.fetch and pkg.filter rule) and the re-hunt's alerts
// (alert.rule_id) carry it.
const Rule = "known_malicious"

// AlertKey names one alert of the re-hunt: a session, a record and the
// listed package's purl. An alert is raised once per key.
type AlertKey struct {
	SessionID, Advisory, Package string
}

// Raised returns the keys of the known_malicious alerts the index holds,
// which a re-hunt does not raise again.
func Raised(ctx context.Context, ix *index.Index) (map[AlertKey]bool, error) {
	out := map[AlertKey]bool{}
	err := ix.EachEvent(ctx, query.Filter{Kinds: []query.Kind{{Name: event.KindAlert}}}, func(e *event.Event) error {
		if a := e.Alert; a != nil && a.RuleID == Rule && e.Source == event.SourceRules {
			out[AlertKey{e.SessionID, a.Advisory, a.Package}] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading known_malicious alerts: %w", err)
	}
	return out, nil
}

// Alerts turns findings into the alerts to journal: one per AlertKey
// that raised does not hold, in the finding's session, with refs to every
// matching event of that key, at time now. The caller journals them.
func Alerts(findings []Finding, raised map[AlertKey]bool, now time.Time) []*event.Event {
	var keys []AlertKey
	byKey := map[AlertKey][]*Finding{}
	for i := range findings {
		f := &findings[i]
		k := AlertKey{f.SessionID, f.Advisory, f.Package}
		if raised[k] || f.SessionID == "" {
			continue
		}
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], f)
	}
	out := make([]*event.Event, 0, len(keys))
	for _, k := range keys {
		out = append(out, alertOf(k, byKey[k], now))
	}
	return out
}

// alertOf is the one conversion of a key's findings to an alert event.
func alertOf(k AlertKey, fs []*Finding, now time.Time) *event.Event {
	var refs []uint64
	var what []string
	installed := false
	for _, f := range fs {
		for _, s := range f.Seqs {
			if !slices.Contains(refs, s) {
				refs = append(refs, s)
			}
		}
		switch f.Match {
		case MatchPackage, MatchHash:
			installed = true
			what = append(what, fmt.Sprintf("%s (%s)", f.Package, strings.Join(f.Kinds, ", ")))
		default:
			what = append(what, fmt.Sprintf("%s %s", f.Match, f.IOC))
		}
	}
	slices.Sort(refs)
	title := "the session contacted an indicator of a known-malicious package"
	if installed {
		title = "the session installed a known-malicious package"
	}
	summary := fmt.Sprintf("%s lists %s as malicious; the session's record has %s", k.Advisory, k.Package, strings.Join(what, "; "))
	if s := fs[0].Summary; s != "" {
		summary += ": " + s
	}
	return &event.Event{
		V: event.SchemaVersion, TS: now.UTC(), SessionID: k.SessionID, Kind: event.KindAlert, Source: event.SourceRules,
		Alert: &event.Alert{RuleID: Rule, Title: title, Level: "critical", Refs: refs,
			Summary: event.Redact(event.Cut(summary, 1000)), Package: k.Package, Advisory: k.Advisory},
	}
}
