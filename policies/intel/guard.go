package intel

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// PackagePolicy decides on a package version, as the mirror asks
// (registry-mirror/fetch.Policy; *policies.Engine is one).
type PackagePolicy interface {
	Package(ctx context.Context, req policies.PackageRequest) policies.Decision
	UpstreamApproved(ecosystem, url string) bool
}

// Guard returns p with the known_malicious check in front of its own: a
// request for a name@version that a record of s lists is blocked, whatever
// p decides, by a first check named Rule whose reason names the records
// (the MAL ids). The mirror, which asks its policy about every version it
// serves, then hides the version from the metadata (pkg.filter, as the
// blocklist does) and refuses its artifact (pkg.fetch outcome blocked,
// rule known_malicious). A request the store does not list gets p's
// decision unchanged. A nil s is no store: Guard returns p.
func Guard(p PackagePolicy, s *Store) PackagePolicy {
	if s == nil {
		return p
	}
	return &guarded{PackagePolicy: p, s: s}
}

type guarded struct {
	PackagePolicy
	s *Store
}

func (g *guarded) Package(ctx context.Context, req policies.PackageRequest) policies.Decision {
	d := g.PackagePolicy.Package(ctx, req)
	if req.Name == "" {
		return d
	}
	eco := strings.ToLower(req.Ecosystem)
	ids := g.s.LookupIDs(eco, req.Name, req.Version)
	if len(ids) == 0 {
		return d
	}
	c := policies.Check{Name: Rule, Verdict: policies.Block, Rule: Rule,
		Reason: fmt.Sprintf("%s is listed as malicious by %s", purl.Of(eco, req.Name, req.Version), strings.Join(ids, ", "))}
	return policies.Decision{Verdict: policies.Block, Reason: c.Reason, Rule: c.Rule,
		Checks: append([]policies.Check{c}, d.Checks...)}
}

// Generation moves with every import into the store, as its lookups see
// it (the mirror's fetch.Generational): the mirror decides again on the
// versions it decided on before an import.
func (g *guarded) Generation() uint64 { return uint64(g.s.current().generation) }
