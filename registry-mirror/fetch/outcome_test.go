package fetch

import (
	"context"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/policies"
)

const outcomePolicy = `
sources:
  registries:
    npm: [https://registry.npmjs.org/]
on_unknown_source: block
blocklist:
  - purl: pkg:npm/event-stream@3.3.6
    reason: backdoor
cooldown:
  min_age: 2d
  action: block
install_scripts: block
`

// TestOutcome: each blocking check of a real engine's decision names its
// outcome (cooldown, unknown_source, blocked for the rest), and a decision
// that does not block is served.
func TestOutcome(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p, err := policies.Parse("outcome.yaml", []byte(outcomePolicy))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	e, err := policies.New(p, policies.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	old := now.Add(-30 * 24 * time.Hour)
	src := "https://registry.npmjs.org/a/-/a-1.0.0.tgz"
	tests := []struct {
		name string
		req  policies.PackageRequest
		want string
	}{
		{name: "allowed", req: policies.PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: src, Published: old}, want: Served},
		{name: "blocklist", req: policies.PackageRequest{Ecosystem: "npm", Name: "event-stream", Version: "3.3.6", Source: src, Published: old}, want: Blocked},
		{name: "unknown source", req: policies.PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: "https://evil.example/a.tgz", Published: old}, want: UnknownSource},
		{name: "cooldown", req: policies.PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: src, Published: now.Add(-time.Hour)}, want: Cooldown},
		{name: "install scripts", req: policies.PackageRequest{Ecosystem: "npm", Name: "a", Version: "1.0.0", Source: src, Published: old, InstallScripts: true}, want: Blocked},
		{name: "no package", req: policies.PackageRequest{Ecosystem: "npm"}, want: Blocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := &Env{Policy: e}
			got, d := env.Decide(context.Background(), tt.req)
			if got != tt.want {
				t.Errorf("Decide(%+v) = %s, want %s (checks: %+v)", tt.req, got, tt.want, d.Checks)
			}
		})
	}
}
