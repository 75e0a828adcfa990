package npm

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch/fetchtest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// clock is a test's clock, for the mirror and its policy alike.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// clockedMirror is newMirror with the policy in yaml (its sources
// approving reg) behind a fetch.Switch, the mirror and the policy on clk.
func clockedMirror(t *testing.T, reg *npmtest.Registry, clk *clock, yaml string) (*mirror, *fetch.Switch) {
	t.Helper()
	env := fetchtest.New(t, "")
	sw := fetch.NewSwitch(clockedPolicy(t, reg, clk, yaml))
	env.Policy, env.Now = sw, clk.Now
	u, _ := url.Parse(reg.URL)
	m := &mirror{Env: env, reg: reg, h: New(env.Env, u, "/npm/")}
	m.Server = fetchtest.Serve(t, "/npm/", m.h.Serve)
	return m, sw
}

func clockedPolicy(t *testing.T, reg *npmtest.Registry, clk *clock, yaml string) *policies.Engine {
	t.Helper()
	p, err := policies.Parse("test.yaml", []byte("sources:\n  registries:\n    npm: ["+reg.URL+"/]\n"+yaml))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p, policies.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// versionsServed are the versions of the abbreviated packument of name.
func (m *mirror) versionsServed(t *testing.T, name string) []string {
	t.Helper()
	code, b, _ := m.get(t, "/npm/"+name, abbreviated)
	if code != 200 {
		t.Fatalf("GET %s = %d %s", name, code, b)
	}
	var p struct {
		Versions map[string]json.RawMessage `json:"versions"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(func(yield func(string) bool) {
		for v := range p.Versions {
			if !yield(v) {
				return
			}
		}
	})
}

// TestVerdictsAreFreshDecisions: what the packument and the tarballs are
// served from, decided once, is what the policy decides on each version
// now, and the packument a mirror that decided once serves is the one a
// new mirror serves.
func TestVerdictsAreFreshDecisions(t *testing.T) {
	clk := &clock{now: time.Now()}
	reg := npmtest.Start(t, fixture()...)
	pol := "cooldown:\n  min_age: 48h\n  action: block\nblocklist:\n  - purl: pkg:npm/left-pad@1.2.0\n    reason: a test\n"
	m, _ := clockedMirror(t, reg, clk, pol)
	first := m.versionsServed(t, "left-pad")
	m.versionsServed(t, "left-pad")
	p, err := m.h.get(context.Background(), "left-pad")
	if err != nil {
		t.Fatal(err)
	}
	v := m.h.verdicts(context.Background(), p)
	for ver := range p.Versions {
		out, d := m.h.decide(context.Background(), p, ver)
		if got := v.decided[ver]; got.outcome != out || got.d.Verdict != d.Verdict || got.d.Rule != d.Rule || got.d.Reason != d.Reason {
			t.Errorf("remembered decision on %s = %s %+v, a fresh one %s %+v", ver, got.outcome, got.d, out, d)
		}
	}
	fresh, _ := clockedMirror(t, reg, clk, pol)
	if again := fresh.versionsServed(t, "left-pad"); !slices.Equal(first, again) || !slices.Equal(first, []string{"1.3.0"}) {
		t.Errorf("versions served = %q, by a new mirror %q, want [1.3.0]", first, again)
	}
}

// TestVerdictsReload: a policy put in force (a reload) decides the next
// request: the version it blocklists leaves the packument and its tarball
// is refused, though the packument and the decisions before were
// remembered.
func TestVerdictsReload(t *testing.T) {
	clk := &clock{now: time.Now()}
	reg := npmtest.Start(t, fixture()...)
	m, sw := clockedMirror(t, reg, clk, "")
	tarball := "/npm/left-pad/-/left-pad-1.3.0.tgz"
	if got := m.versionsServed(t, "left-pad"); !slices.Equal(got, []string{"1.2.0", "1.3.0", "1.4.0"}) {
		t.Fatalf("versions served = %q, want all three", got)
	}
	if code, b, _ := m.get(t, tarball, ""); code != 200 {
		t.Fatalf("GET %s = %d %s", tarball, code, b)
	}
	sw.Set(clockedPolicy(t, reg, clk, "blocklist:\n  - purl: pkg:npm/left-pad@1.3.0\n    reason: a reload\n"))
	if got := m.versionsServed(t, "left-pad"); !slices.Equal(got, []string{"1.2.0", "1.4.0"}) {
		t.Errorf("versions served after the reload = %q, want 1.2.0 and 1.4.0", got)
	}
	if code, b, _ := m.get(t, tarball, ""); code != 403 || m.last().Outcome != fetch.Blocked {
		t.Errorf("GET %s after the reload = %d %s (outcome %s), want a 403, blocked", tarball, code, b, m.last().Outcome)
	}
	if n := reg.Count("/left-pad"); n != 1 {
		t.Errorf("the upstream saw %d packument requests, want 1", n)
	}
}

// TestVerdictsCooldownEnds: a version inside the cooldown is served from
// the moment its cooldown ends, though the packument and the decisions on
// it were made a moment before (well inside maxVerdictAge and the
// metadata's TTL).
func TestVerdictsCooldownEnds(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	clk := &clock{now: start}
	young := npmtest.Version{Version: "1.4.0", Published: start.Add(-48*time.Hour + 10*time.Second)}
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.3.0", Published: old}, young}})
	m, _ := clockedMirror(t, reg, clk, "cooldown:\n  min_age: 48h\n  action: block\n")
	tarball := "/npm/left-pad/-/left-pad-1.4.0.tgz"
	for _, step := range []struct {
		after  time.Duration
		served []string
		status int
	}{
		{0, []string{"1.3.0"}, 403},
		{9 * time.Second, []string{"1.3.0"}, 403},
		{time.Second, []string{"1.3.0", "1.4.0"}, 200},
	} {
		clk.Add(step.after)
		if got := m.versionsServed(t, "left-pad"); !slices.Equal(got, step.served) {
			t.Errorf("at +%s: versions served = %q, want %q", clk.Now().Sub(start), got, step.served)
		}
		if code, b, _ := m.get(t, tarball, ""); code != step.status {
			t.Errorf("at +%s: GET %s = %d %s, want %d", clk.Now().Sub(start), tarball, code, b, step.status)
		}
	}
	if n := reg.Count("/left-pad"); n != 1 {
		t.Errorf("the upstream saw %d packument requests, want 1", n)
	}
}

// TestVerdictsConcurrent: many clients asking at once for a packument and
// a tarball whose decisions are being made and whose packument is being
// rendered all get the same answer (run with -race).
func TestVerdictsConcurrent(t *testing.T) {
	clk := &clock{now: time.Now()}
	reg := npmtest.Start(t, fixture()...)
	m, _ := clockedMirror(t, reg, clk, "cooldown:\n  min_age: 48h\n  action: block\n")
	var wg sync.WaitGroup
	got := make([][]string, 16)
	for i := range got {
		wg.Go(func() {
			got[i] = m.versionsServed(t, "left-pad")
			if code, b, _ := m.get(t, "/npm/left-pad/-/left-pad-1.3.0.tgz", ""); code != 200 {
				t.Errorf("GET tarball = %d %s", code, b)
			}
		})
	}
	wg.Wait()
	for i, g := range got {
		if !slices.Equal(g, []string{"1.2.0", "1.3.0"}) {
			t.Errorf("client %d was served versions %q, want 1.2.0 and 1.3.0", i, g)
		}
	}
}
