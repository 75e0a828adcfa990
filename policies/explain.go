package policies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies/release"
	"github.com/sandtrail/sandtrail/resolver"
)

// An ExplainRequest asks what the policy decides about a package spec, and
// why (`sandtrail policy explain`).
type ExplainRequest struct {
	// Ecosystem, Name and Spec name the package and the version spec as
	// asked; an empty Spec means any version (see release.Info.Resolve).
	Ecosystem, Name, Spec string
	// Registry is the registry to list versions from; empty means the
	// policy's first registry for the ecosystem.
	Registry string
	// Versions, when not nil, are the candidate versions, instead of the
	// ones the registry lists.
	Versions []string
	// Source, when not empty, is the source URL to check instead of the
	// artifact URL the registry names.
	Source string
	// Published, when not zero, is the publish time instead of the one the
	// registry gives.
	Published time.Time
	// InstallScripts, when not nil, says whether the package runs install
	// scripts instead of what the registry says.
	InstallScripts *bool
}

// A Lister reads what a registry says about a package; *release.Fetcher is
// one.
type Lister interface {
	Fetch(ctx context.Context, ecosystem, registry, name string) (*release.Info, error)
}

// An Explanation is the version a spec resolved to and the policy's
// decision about it, with every check. It is the JSON output of
// `sandtrail policy explain`.
type Explanation struct {
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Requested string `json:"requested"`
	Resolved  string `json:"resolved"`
	// Candidates is the number of versions the spec was resolved among.
	Candidates int `json:"candidates"`
	// Unlisted is set when the spec is an exact version that is not among
	// the candidates (an unpublished npm release), explained as asked.
	Unlisted       bool       `json:"unlisted,omitempty"`
	Registry       string     `json:"registry,omitempty"`
	Source         string     `json:"source,omitempty"`
	Published      *time.Time `json:"published,omitempty"`
	InstallScripts bool       `json:"install_scripts"`
	Verdict        Verdict    `json:"verdict"`
	Reason         string     `json:"reason"`
	Rule           string     `json:"rule,omitempty"`
	Checks         []Check    `json:"checks"`
}

// Explain resolves req.Spec to a version, among req.Versions or else among
// the versions that l reads from the registry, and returns what e decides
// about it. l is not used when req.Versions is set. It returns an error when
// there is no registry to ask, the ecosystem has no registry listing
// (release.ErrUnsupported), the registry fails, or nothing matches (wrapping
// resolver.ErrNoMatch). Errors do not name the request: callers add it.
func (e *Engine) Explain(ctx context.Context, req ExplainRequest, l Lister) (*Explanation, error) {
	if req.Registry == "" {
		if regs := e.p.Sources.Registries[req.Ecosystem]; len(regs) > 0 {
			req.Registry = regs[0]
		}
	}
	info, err := listVersions(ctx, req, l)
	if err != nil {
		return nil, err
	}
	v, unlisted, err := resolveSpec(info, req.Ecosystem, req.Spec)
	if err != nil {
		return nil, err
	}
	pr := PackageRequest{
		Ecosystem: req.Ecosystem, Name: req.Name, Version: v.Version, Requested: req.Spec,
		Source: v.Artifact, Registry: req.Registry,
		Published: v.Published, InstallScripts: v.InstallScripts,
	}
	if req.Source != "" {
		pr.Source = req.Source
	}
	if !req.Published.IsZero() {
		pr.Published = req.Published
	}
	if req.InstallScripts != nil {
		pr.InstallScripts = *req.InstallScripts
	}
	d := e.Package(ctx, pr)
	x := &Explanation{
		Ecosystem: req.Ecosystem, Name: req.Name, Requested: req.Spec, Resolved: v.Version,
		Candidates: len(info.Versions), Unlisted: unlisted, Registry: req.Registry, Source: pr.Source,
		InstallScripts: pr.InstallScripts,
		Verdict:        d.Verdict, Reason: d.Reason, Rule: d.Rule, Checks: d.Checks,
	}
	if !pr.Published.IsZero() {
		t := pr.Published.UTC()
		x.Published = &t
	}
	return x, nil
}

// listVersions returns req.Versions as an Info, or what l reads from
// req.Registry.
func listVersions(ctx context.Context, req ExplainRequest, l Lister) (*release.Info, error) {
	if req.Versions != nil {
		info := &release.Info{Name: req.Name}
		for _, v := range req.Versions {
			if v = strings.TrimSpace(v); v != "" {
				info.Versions = append(info.Versions, release.Version{Version: v})
			}
		}
		return info, nil
	}
	if req.Registry == "" {
		return nil, fmt.Errorf("the policy lists no %s registry to read versions from; pass --registry or --versions", req.Ecosystem)
	}
	if l == nil {
		return nil, fmt.Errorf("listing %s versions: no registry reader; pass --versions", req.Ecosystem)
	}
	info, err := l.Fetch(ctx, req.Ecosystem, req.Registry, req.Name)
	if errors.Is(err, release.ErrUnsupported) {
		return nil, fmt.Errorf("sandtrail cannot list %s versions from a registry; pass --versions", req.Ecosystem)
	}
	return info, err
}

// resolveSpec resolves spec among info's versions. An exact version that
// the registry no longer lists (npm unpublished, PyPI deleted) may still be
// in a lockfile or a cache: it is returned as asked, and unlisted.
func resolveSpec(info *release.Info, eco, spec string) (v release.Version, unlisted bool, err error) {
	v, err = info.Resolve(eco, spec)
	if errors.Is(err, resolver.ErrNoMatch) && spec != "" {
		if _, cerr := resolver.Compare(eco, spec, spec); cerr == nil {
			return release.Version{Version: spec}, true, nil
		}
	}
	return v, false, err
}
