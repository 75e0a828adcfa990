package daemon

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/release"
	"github.com/sandtrail/sandtrail/record/ingest"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	mirror "github.com/sandtrail/sandtrail/registry-mirror"
)

// checker answers the shims' pre-install checks with the daemon's policy
// (policies.Engine.PreInstall). A request that names no registry, or names
// the daemon's own mirror, is checked as coming from the mirror's upstream
// for its ecosystem, since that is where the mirror will fetch it; a
// pinned version's publish time is looked up there for the cooldown.
type checker struct {
	pol       *policies.Engine
	mirror    string // the daemon mirror's URL, "" without one
	upstreams map[string]string
	rel       *release.Fetcher
	timeout   time.Duration
}

var _ server.Checker = (*checker)(nil)

func newChecker(pol *policies.Engine, mirrorURL string, upstreams map[string]string, log hclog.Logger) *checker {
	return &checker{pol: pol, mirror: mirrorURL, upstreams: upstreams,
		rel:     release.New(release.WithClient(&http.Client{Timeout: 20 * time.Second}), release.WithLogger(log)),
		timeout: 20 * time.Second}
}

// Check decides each check; it never fails (see policies.Engine.PreInstall).
func (c *checker) Check(ctx context.Context, _ string, checks []ingest.Check) []ingest.Verdict {
	out := make([]ingest.Verdict, len(checks))
	for i, ck := range checks {
		d := c.pol.PreInstall(ctx, c.request(ctx, ck))
		out[i] = ingest.Verdict{Verdict: string(d.Verdict), Rule: d.Rule, Reason: d.Reason}
	}
	return out
}

// request is the policy's view of a check.
func (c *checker) request(ctx context.Context, ck ingest.Check) policies.PackageRequest {
	req := policies.PackageRequest{Ecosystem: ck.Ecosystem, Name: ck.Name, Version: ck.Exact, Requested: ck.Spec,
		Source: ck.Source, Registry: ck.Registry}
	upstream, _, served := mirror.Upstream(c.upstreams, ck.Ecosystem)
	if served && (req.Registry == "" || (c.mirror != "" && strings.HasPrefix(req.Registry, c.mirror+"/"))) {
		req.Registry = upstream
	}
	if req.Version != "" && req.Name != "" && req.Source == "" && req.Registry == upstream {
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		if info, err := c.rel.Fetch(ctx, ck.Ecosystem, upstream, ck.Name); err == nil {
			if v, ok := info.Lookup(ck.Exact); ok {
				req.Published = v.Published
			}
		}
	}
	return req
}
