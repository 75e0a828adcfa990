package policies

import "testing"

func TestDomainBlocked(t *testing.T) {
	e := newTestEngine(t, `
egress:
  allowed_domains: [registry.npmjs.org]
  blocked_domains: [evil.example, "*.tracker.example"]
`)
	tests := []struct {
		name    string
		query   string
		blocked bool
		reason  string
	}{
		{name: "exact", query: "evil.example", blocked: true, reason: "evil.example: domain is blocked (egress.blocked_domains[0])"},
		{name: "case and trailing dot", query: "EVIL.Example.", blocked: true, reason: "evil.example: domain is blocked (egress.blocked_domains[0])"},
		{name: "exact excludes subdomains", query: "www.evil.example"},
		{name: "wildcard subdomain", query: "a.b.tracker.example", blocked: true, reason: "a.b.tracker.example: domain is blocked (egress.blocked_domains[1])"},
		{name: "wildcard excludes the apex", query: "tracker.example"},
		{name: "allowed", query: "registry.npmjs.org"},
		{name: "other", query: "example.com"},
		{name: "root", query: "."},
		{name: "empty", query: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocked, reason := e.DomainBlocked(tt.query)
			if blocked != tt.blocked || reason != tt.reason {
				t.Errorf("DomainBlocked(%q) = %v, %q, want %v, %q", tt.query, blocked, reason, tt.blocked, tt.reason)
			}
		})
	}
	if blocked, _ := newTestEngine(t, "").DomainBlocked("evil.example"); blocked {
		t.Error("DomainBlocked with an empty policy = true, want false")
	}
}
