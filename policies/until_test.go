package policies

import (
	"context"
	"testing"
	"time"
)

// TestDecisionUntil: a decision inside the cooldown holds until the
// cooldown ends, and the decision asked again then is different; a
// decision that no passing of time changes has no Until.
func TestDecisionUntil(t *testing.T) {
	now := testNow
	e := newTestEngine(t, testPolicy, WithClock(func() time.Time { return now }))
	req := func(name string, published time.Time) PackageRequest {
		return PackageRequest{Ecosystem: "npm", Name: name, Version: "1.0.0", Published: published,
			Source: "https://registry.npmjs.org/" + name + "/-/" + name + "-1.0.0.tgz"}
	}
	young := req("left-pad", testNow.Add(-5*time.Hour))
	for _, tt := range []struct {
		name  string
		req   PackageRequest
		until time.Time
	}{
		{"inside the cooldown", young, young.Published.Add(48 * time.Hour)},
		{"published in the future", req("left-pad", testNow.Add(time.Hour)), testNow.Add(49 * time.Hour)},
		{"older than the cooldown", req("left-pad", testNow.Add(-72*time.Hour)), time.Time{}},
		{"unknown publish time", req("left-pad", time.Time{}), time.Time{}},
		{"excluded from the cooldown", req("@myorg/x", testNow.Add(-time.Hour)), time.Time{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := e.Package(context.Background(), tt.req); !d.Until.Equal(tt.until) {
				t.Errorf("Package(%s).Until = %v, want %v", tt.name, d.Until, tt.until)
			}
		})
	}
	before := e.Package(context.Background(), young)
	now = before.Until
	if after := e.Package(context.Background(), young); before.Verdict != Block || after.Verdict != Allow || !after.Until.IsZero() {
		t.Errorf("Package at Until = %s (until %v), before %s; want allow, with no Until, after block", after.Verdict, after.Until, before.Verdict)
	}
}
