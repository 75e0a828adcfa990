package intel

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/journal/journaltest"
)

var huntStart = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func pkgEvent(sess string, at int, kind string, src event.Source, eco, name, version string) *event.Event {
	e := &event.Event{V: event.SchemaVersion, TS: huntStart.Add(time.Duration(at) * time.Second), SessionID: sess,
		Kind: kind, Source: src, Pkg: &event.Pkg{Ecosystem: eco, Name: name, Resolved: version}}
	if kind == event.KindPkgFetch {
		e.Pkg.Outcome = "served"
	}
	return e
}

func netEvent(sess string, at int, kind, domain, ip string) *event.Event {
	n := &event.Net{Op: "connect", Proto: "tcp", DstIP: ip, DstPort: 443, Domain: domain}
	if kind == event.KindNetDNS {
		n = &event.Net{Op: "dns", Proto: "udp", DNS: &event.DNS{Query: domain}}
	}
	return &event.Event{V: event.SchemaVersion, TS: huntStart.Add(time.Duration(at) * time.Second), SessionID: sess,
		Kind: kind, Source: event.SourceKernel, Proc: &event.Proc{Pid: 100 + int32(at)}, Net: n}
}

// huntRecord is a journal with the sessions the hunt must find and the
// look-alikes it must not, and its index built from it.
func huntRecord(t *testing.T) (*journal.Journal, string, *index.Index) {
	t.Helper()
	blocked := pkgEvent("s-refused", 5, event.KindPkgFetch, event.SourceMirror, "npm", "evil-pkg", "1.0.0")
	blocked.Pkg.Outcome, blocked.Pkg.Rule = "blocked", Rule
	hashed := pkgEvent("s-cargo", 7, event.KindPkgFetch, event.SourceMirror, "cargo", "proc-macro1", "0.1.0")
	hashed.Pkg.Hash = "sha256:ab5d0e0c5a6b27f3f0e5c8c1b0a1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9"
	evs := []*event.Event{
		pkgEvent("s-npm", 1, event.KindPkgInstall, event.SourceShim, "npm", "evil-pkg", "1.0.0"),
		pkgEvent("s-npm", 2, event.KindPkgFetch, event.SourceMirror, "npm", "evil-pkg", "1.0.0"),
		netEvent("s-npm", 3, event.KindNetDNS, "hooks.exfil.example", ""),
		netEvent("s-npm", 4, event.KindNetConnect, "", "203.0.113.7"),
		blocked,
		pkgEvent("s-clean", 6, event.KindPkgFetch, event.SourceMirror, "npm", "@typo/colors", "1.0.3"),
		netEvent("s-clean", 6, event.KindNetDNS, "notexfil.example", ""),
		hashed,
		pkgEvent("s-pip", 8, event.KindPkgInstall, event.SourceShim, "pypi", "reqeusts", "1.1"),
		pkgEvent("s-pip", 8, event.KindPkgFetch, event.SourceMirror, "pypi", "ReqEusts", "1.1"),
		pkgEvent("s-pip", 9, event.KindPkgInstall, event.SourceShim, "pypi", "reqeusts", "1.2"),
		netEvent("s-pip", 10, event.KindNetConnect, "", "198.51.100.23"),
	}
	j, dir := journaltest.Open(t)
	if err := j.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	ix, err := index.OpenCurrent(context.Background(), filepath.Join(t.TempDir(), "index.db"), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return j, dir, ix
}

type found struct{ session, advisory, match, pkg, ioc string }

func findings(fs []Finding) []found {
	var out []found
	for _, f := range fs {
		out = append(out, found{f.SessionID, f.Advisory, f.Match, f.Package, f.IOC})
	}
	return out
}

func TestHunt(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	importPath(t, s, fixture)
	_, _, ix := huntRecord(t)
	fs, err := Hunt(ctx, s, ix, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := []found{
		{"s-cargo", "MAL-2025-3001", MatchHash, "pkg:cargo/proc-macro1@0.1.0", "ab5d0e0c5a6b27f3f0e5c8c1b0a1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9"},
		{"s-cargo", "MAL-2025-3001", MatchPackage, "pkg:cargo/proc-macro1@0.1.0", ""},
		{"s-npm", "MAL-2025-1001", MatchPackage, "pkg:npm/evil-pkg@1.0.0", ""},
		{"s-npm", "MAL-2025-1001", MatchDomain, "pkg:npm/evil-pkg", "exfil.example"},
		{"s-npm", "MAL-2025-1001", MatchURL, "pkg:npm/evil-pkg", "https://hooks.exfil.example/collect"},
		{"s-npm", "MAL-2025-1001", MatchIP, "pkg:npm/evil-pkg", "203.0.113.7"},
		{"s-pip", "MAL-2025-2001", MatchPackage, "pkg:pypi/reqeusts@1.1", ""},
		{"s-pip", "MAL-2025-2001", MatchIP, "pkg:pypi/reqeusts", "198.51.100.23"},
	}
	if got := findings(fs); !slices.Equal(got, want) {
		t.Errorf("Hunt found\n%v\nwant\n%v", got, want)
	}
	for _, f := range fs {
		if f.SessionID == "s-npm" && f.Match == MatchPackage && (len(f.Seqs) != 2 || !slices.Equal(f.Kinds, []string{event.KindPkgInstall, event.KindPkgFetch})) {
			t.Errorf("s-npm's package finding = %+v, want the install and the fetch", f)
		}
		if f.SessionID == "s-pip" && f.Match == MatchPackage && len(f.Seqs) != 2 {
			t.Errorf("s-pip's package finding = %+v, want both spellings' events in one", f)
		}
	}
	// --since leaves out what came before.
	fs, err = Hunt(ctx, s, ix, huntStart.Add(7*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.SessionID == "s-npm" {
			t.Errorf("Hunt since +7s found %+v, from before", f)
		}
	}
}

// TestRehuntAlerts: the alerts of a hunt are raised once per session,
// record and package; journaled and indexed, they are not raised again; a
// withdrawal makes the hunt stop reporting the match, and the old alert
// stays.
func TestRehuntAlerts(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	importPath(t, s, fixture)
	j, dir, ix := huntRecord(t)
	fs, err := Hunt(ctx, s, ix, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	raised, err := Raised(ctx, ix)
	if err != nil || len(raised) != 0 {
		t.Fatalf("Raised before any alert = %v, %v", raised, err)
	}
	alerts := Alerts(fs, raised, time.Now())
	if len(alerts) != 5 {
		t.Fatalf("Alerts = %d, want 5 (s-cargo, s-npm twice: the version and the package's indicators, s-pip twice)", len(alerts))
	}
	for _, a := range alerts {
		if err := a.Validate(); err != nil {
			t.Errorf("alert %+v: %v", a.Alert, err)
		}
		if a.Alert.Level != "critical" || a.Alert.RuleID != Rule || a.Alert.Advisory == "" || len(a.Alert.Refs) == 0 {
			t.Errorf("alert = %+v", a.Alert)
		}
	}
	if err := j.Append(ctx, alerts...); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.CatchUp(ctx, dir); err != nil {
		t.Fatal(err)
	}
	raised, err = Raised(ctx, ix)
	if err != nil || len(raised) != 5 {
		t.Fatalf("Raised after journaling = %d, %v; want 5", len(raised), err)
	}
	if again := Alerts(fs, raised, time.Now()); len(again) != 0 {
		t.Errorf("Alerts again = %d, want none", len(again))
	}
	// Withdraw MAL-2025-1001.
	w := filepath.Join(t.TempDir(), "osv", "withdrawn", "npm", "evil-pkg", "MAL-2025-1001.json")
	writeFile(t, w, readFixture(t, "malicious/npm/evil-pkg/MAL-2025-1001.json"))
	importPath(t, s, filepath.Dir(filepath.Dir(filepath.Dir(w))))
	fs, err = Hunt(ctx, s, ix, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Advisory == "MAL-2025-1001" {
			t.Errorf("after the withdrawal Hunt still finds %+v", f)
		}
	}
	if raised, _ := Raised(ctx, ix); !raised[AlertKey{"s-npm", "MAL-2025-1001", "pkg:npm/evil-pkg@1.0.0"}] {
		t.Errorf("the alert of the withdrawn record left the index")
	}
}
