package policies

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/policies/release"
	"github.com/sandtrail/sandtrail/resolver"
)

// fakeLister serves one Info, and records the registry it was asked.
type fakeLister struct {
	info     *release.Info
	err      error
	registry string
}

func (f *fakeLister) Fetch(_ context.Context, _, registry, _ string) (*release.Info, error) {
	f.registry = registry
	return f.info, f.err
}

func TestExplain(t *testing.T) {
	e := newTestEngine(t, testPolicy)
	old := testNow.Add(-30 * 24 * time.Hour)
	yes := true
	listed := &release.Info{Name: "lodash", Versions: []release.Version{
		{Version: "4.17.20", Published: old, Artifact: "https://registry.npmjs.org/lodash/-/lodash-4.17.20.tgz"},
		{Version: "4.17.21", Published: old, Artifact: "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz"},
	}}
	tests := []struct {
		name     string
		req      ExplainRequest
		resolved string
		verdict  Verdict
		rule     string
		unlisted bool
		registry string
	}{
		{name: "registry listing", req: ExplainRequest{Ecosystem: "npm", Name: "lodash", Spec: "^4.17.0"},
			resolved: "4.17.21", verdict: Allow, rule: "sources.registries.npm[0]", registry: "https://registry.npmjs.org/"},
		{name: "blocklisted range", req: ExplainRequest{Ecosystem: "npm", Name: "lodash", Spec: "4.17.20"},
			resolved: "4.17.20", verdict: Block, rule: "blocklist[1]", registry: "https://registry.npmjs.org/"},
		{name: "unlisted exact version", req: ExplainRequest{Ecosystem: "npm", Name: "lodash", Spec: "4.17.19"},
			resolved: "4.17.19", verdict: Block, rule: "blocklist[1]", unlisted: true, registry: "https://registry.npmjs.org/"},
		{name: "given versions and overrides", req: ExplainRequest{Ecosystem: "pypi", Name: "requests", Spec: ">=2,<3",
			Versions: []string{" 2.31.0", "", "3.0"}, Source: "https://pypi.org/simple/requests/", Published: old, InstallScripts: &yes},
			resolved: "2.31.0", verdict: Flag, rule: "install_scripts", registry: "https://pypi.org/simple/"},
		{name: "oci tag", req: ExplainRequest{Ecosystem: "oci", Name: "library/alpine", Spec: "3.1", Versions: []string{"3.1"}},
			resolved: "3.1", verdict: Block, rule: "blocklist[5]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &fakeLister{info: listed}
			x, err := e.Explain(context.Background(), tt.req, l)
			if err != nil {
				t.Fatalf("Explain(%+v) = %v", tt.req, err)
			}
			if x.Resolved != tt.resolved || x.Verdict != tt.verdict || x.Rule != tt.rule || x.Unlisted != tt.unlisted || x.Registry != tt.registry {
				t.Errorf("Explain(%+v) = %s %s [%s] unlisted %v registry %q (%s), want %s %s [%s] unlisted %v registry %q",
					tt.req, x.Resolved, x.Verdict, x.Rule, x.Unlisted, x.Registry, x.Reason, tt.resolved, tt.verdict, tt.rule, tt.unlisted, tt.registry)
			}
			if tt.req.Versions == nil && l.registry != tt.registry {
				t.Errorf("Explain(%+v) asked registry %q, want %q", tt.req, l.registry, tt.registry)
			}
			if len(x.Checks) != 4 {
				t.Errorf("Explain(%+v) = %d checks, want 4", tt.req, len(x.Checks))
			}
		})
	}
}

func TestExplainErrors(t *testing.T) {
	e := newTestEngine(t, testPolicy)
	tests := []struct {
		name string
		req  ExplainRequest
		l    Lister
		want string
		is   error
	}{
		{name: "no registry", req: ExplainRequest{Ecosystem: "oci", Name: "alpine", Spec: "3"}, l: &fakeLister{}, want: "lists no oci registry"},
		{name: "no lister", req: ExplainRequest{Ecosystem: "npm", Name: "lodash"}, want: "pass --versions"},
		{name: "unsupported", req: ExplainRequest{Ecosystem: "deb", Name: "curl"}, l: &fakeLister{err: release.ErrUnsupported}, want: "cannot list deb versions"},
		{name: "registry fails", req: ExplainRequest{Ecosystem: "npm", Name: "nope"}, l: &fakeLister{err: release.ErrNotFound}, is: release.ErrNotFound},
		{name: "no match", req: ExplainRequest{Ecosystem: "npm", Name: "lodash", Spec: "^9", Versions: []string{"4.17.21"}}, is: resolver.ErrNoMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Explain(context.Background(), tt.req, tt.l)
			if err == nil || tt.want != "" && !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Explain(%+v) = %v, want an error containing %q or wrapping %v", tt.req, err, tt.want, tt.is)
			}
		})
	}
}
