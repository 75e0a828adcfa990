package index

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// huntEvents: lookups and connections with the look-alikes a wrong
// hunt would confuse (a sibling domain sharing a suffix, an IPv4-mapped
// address), and installs and fetches of two versions.
func huntEvents() []*event.Event {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var evs []*event.Event
	add := func(sess, kind string, src event.Source, f func(*event.Event)) {
		e := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(len(evs)) * time.Second), SessionID: sess, Kind: kind, Source: src}
		f(e)
		evs = append(evs, e)
	}
	dns := func(sess, name string) {
		add(sess, event.KindNetDNS, event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 1}
			e.Net = &event.Net{Op: "dns", Proto: "udp", DNS: &event.DNS{Query: name}}
		})
	}
	connect := func(sess, ip string) {
		add(sess, event.KindNetConnect, event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 1}
			e.Net = &event.Net{Op: "connect", Proto: "tcp", DstIP: ip, DstPort: 443}
		})
	}
	pkg := func(sess, kind, version string) {
		src := event.SourceShim
		if kind == event.KindPkgFetch {
			src = event.SourceMirror
		}
		add(sess, kind, src, func(e *event.Event) { e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "evil", Resolved: version} })
	}
	dns("a", "c2.evil.example")             // 0
	dns("b", "badevil.example")             // 1: not a sub-domain
	dns("c", "EVIL.example.")               // 2: the name itself
	connect("a", "203.0.113.7")             // 3
	connect("b", "203.0.113.70")            // 4
	connect("c", "::ffff:203.0.113.7")      // 5
	pkg("a", event.KindPkgInstall, "1.0.0") // 6
	pkg("a", event.KindPkgFetch, "1.0.0")   // 7
	pkg("b", event.KindPkgInstall, "1.0.1") // 8
	pkg("b", event.KindPkgBlocked, "1.0.0") // 9: not an install or fetch
	return evs
}

func hitSeqs(t *testing.T, each func(fn func(Hit) error) error) []uint64 {
	t.Helper()
	var out []uint64
	if err := each(func(h Hit) error { out = append(out, h.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHuntQueries(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	if err := ix.Add(ctx, entries(t, huntEvents())); err != nil {
		t.Fatal(err)
	}
	var listed []int64
	if err := ix.EachPackage(ctx, func(k PackageKey) error {
		if k.Ecosystem == "npm" && k.Name == "evil" && k.Version == "1.0.0" {
			listed = append(listed, k.ID)
		}
		return nil
	}); err != nil || len(listed) != 1 {
		t.Fatalf("EachPackage found evil@1.0.0 %d times (%v), want once", len(listed), err)
	}
	var zero time.Time
	tests := []struct {
		name string
		each func(fn func(Hit) error) error
		want []uint64
	}{
		{"domain and sub-domains", func(fn func(Hit) error) error { return ix.DomainEvents(ctx, []string{"evil.example"}, zero, fn) }, []uint64{0, 2}},
		{"an address, also mapped", func(fn func(Hit) error) error {
			return ix.AddressEvents(ctx, []string{"203.0.113.7", "not an ip"}, zero, fn)
		}, []uint64{3, 5}},
		{"since", func(fn func(Hit) error) error {
			return ix.AddressEvents(ctx, []string{"203.0.113.7"}, time.Date(2026, 11, 1, 0, 0, 4, 0, time.UTC), fn)
		}, []uint64{5}},
		{"installs and fetches", func(fn func(Hit) error) error { return ix.PackageEvents(ctx, listed, zero, fn) }, []uint64{6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hitSeqs(t, tt.each); !slices.Equal(got, tt.want) {
				t.Errorf("seqs = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHuntPlans: the hunt's event questions read their side table through
// its covering index, never the events or side table whole.
func TestHuntPlans(t *testing.T) {
	ix := openTemp(t)
	ctx := context.Background()
	if err := ix.Add(ctx, entries(t, huntEvents())); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, q, want string
		args          []any
	}{
		{"packages", packageEventsQuery(2), "pkgs_pkg", []any{1, 2, int64(0), event.KindPkgInstall, event.KindPkgFetch}},
		{"domains", netEventsQuery("domain_id", 2), "nets_domain", []any{1, 2, int64(0)}},
		{"addresses", netEventsQuery("dst_ip", 2), "nets_ip", []any{"203.0.113.7", "::ffff:203.0.113.7", int64(0)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lines, err := explain(ctx, ix.db, tt.q, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			if !strings.Contains(plan, tt.want) || strings.Contains(plan, "SCAN x") || strings.Contains(plan, "SCAN e") {
				t.Errorf("plan does not read %s alone:\n%s", tt.want, plan)
			}
		})
	}
}
