package fetch

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
)

// Policy decides on a package version; *policies.Engine is one.
type Policy interface {
	Package(ctx context.Context, req policies.PackageRequest) policies.Decision
	// UpstreamApproved reports whether anything from a registry of the
	// ecosystem at the URL can be approved (policies.Engine.UpstreamApproved).
	UpstreamApproved(ecosystem, url string) bool
}

// Generational is a Policy whose decisions change while it is in force
// (the intel guard's, with every import of known-malicious records): its
// Generation moves when they may have. A Policy that is not one decides
// alike on one request but for the passing of time
// (policies.Decision.Until).
type Generational interface {
	Generation() uint64
}

// Generation names the decisions of the policy in force: a decision
// remembered under one Generation is the decision under an equal one,
// until its policies.Decision.Until. A reload (Switch.Set) and a
// Generational policy's own moves make another.
type Generation struct{ reloads, policy uint64 }

// Generation returns the generation of the policy in force. A caller that
// remembers decisions reads it before it decides: a reload between the two
// then only makes it decide again.
func (env *Env) Generation() Generation {
	var g Generation
	p := env.Policy
	if s, ok := p.(*Switch); ok {
		f := s.cur.Load()
		p, g.reloads = f.p, f.reloads
	}
	if gp, ok := p.(Generational); ok {
		g.policy = gp.Generation()
	}
	return g
}

// Switch is a Policy that a reload replaces whole: it decides with the
// policy last Set, and each Set moves the Generation.
type Switch struct {
	cur atomic.Pointer[inForce]
}

// inForce is the policy a Switch decides with, and how many times it was
// Set.
type inForce struct {
	p       Policy
	reloads uint64
}

var _ Policy = (*Switch)(nil)

// NewSwitch returns a Switch deciding with p.
func NewSwitch(p Policy) *Switch {
	s := &Switch{}
	s.cur.Store(&inForce{p: p})
	return s
}

// Set puts p in force: decisions remembered under the policy before it
// are not used again.
func (s *Switch) Set(p Policy) {
	for {
		old := s.cur.Load()
		if s.cur.CompareAndSwap(old, &inForce{p: p, reloads: old.reloads + 1}) {
			return
		}
	}
}

// Package decides with the policy in force.
func (s *Switch) Package(ctx context.Context, req policies.PackageRequest) policies.Decision {
	return s.cur.Load().p.Package(ctx, req)
}

// UpstreamApproved asks the policy in force.
func (s *Switch) UpstreamApproved(ecosystem, url string) bool {
	return s.cur.Load().p.UpstreamApproved(ecosystem, url)
}

// Env is what the mirror gives each ecosystem's handler.
type Env struct {
	Cache    *cache.Cache
	Upstream *Upstream
	// Policy decides; a *Switch when a reload can replace it.
	Policy Policy
	Log    hclog.Logger
	// MetaTTL is how long metadata is served from the cache before it is
	// fetched again; past it, stale metadata is served only when the
	// upstream cannot be reached.
	MetaTTL time.Duration
	// MaxArtifact bounds an artifact whose size its metadata does not give.
	MaxArtifact int64
	Now         func() time.Time
	// Record takes the record of each artifact served or refused, and
	// Filter each metadata response the policy changed. Neither may block.
	Record func(*Record)
	Filter func(*Filtered)
}
