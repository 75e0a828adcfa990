package fetch

import (
	"context"
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

// Env is what the mirror gives each ecosystem's handler.
type Env struct {
	Cache    *cache.Cache
	Upstream *Upstream
	Policy   Policy
	Log      hclog.Logger
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
