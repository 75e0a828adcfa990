package npm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/listing"
	semver "github.com/sandtrail/sandtrail/resolver/npm"
)

// packument is a parsed full packument, as the mirror holds it.
type packument struct {
	*listing.Packument
	fetched time.Time
	stale   bool     // served from the cache because the upstream failed
	order   []string // the versions that parse, lowest first
	// files are the versions by tarball file name; lost those that lost
	// the attestations of a version before them (lostProvenance).
	files map[string]string
	lost  map[string]bool
	memo  *memo
}

// parsePackument reads a full packument of name (listing.ParsePackument:
// a time that does not parse is an unknown publish time) and orders its
// versions.
func parsePackument(name string, b []byte, fetched time.Time) (*packument, error) {
	lp, err := listing.ParsePackument(name, b)
	if err != nil {
		return nil, err
	}
	p := &packument{Packument: lp, fetched: fetched, files: make(map[string]string, len(lp.Versions)), memo: newMemo()}
	for v, in := range p.Versions {
		if _, err := semver.ParseVersion(v, semver.NPM); err == nil {
			p.order = append(p.order, v)
		}
		if f := path.Base(in.Tarball); in.Tarball != "" {
			if o, dup := p.files[f]; !dup || v < o {
				p.files[f] = v
			}
		}
	}
	sort.Slice(p.order, func(i, j int) bool { return compare(p.order[i], p.order[j]) < 0 })
	p.markLost()
	return p, nil
}

// compare orders two parsable versions.
func compare(a, b string) int {
	va, _ := semver.ParseVersion(a, semver.NPM)
	vb, _ := semver.ParseVersion(b, semver.NPM)
	return va.Compare(vb)
}

// lostProvenance reports whether a version lower than v had attestations
// that v lacks (a version that does not parse is above every one that
// does).
func (p *packument) lostProvenance(v string) bool { return p.lost[v] }

// markLost finds the versions that lostProvenance reports.
func (p *packument) markLost() {
	p.lost = map[string]bool{}
	attested := false
	parses := make(map[string]bool, len(p.order))
	for _, o := range p.order {
		parses[o] = true
		if p.Versions[o].Attested {
			attested = true
		} else if attested {
			p.lost[o] = true
		}
	}
	for v, in := range p.Versions {
		if attested && !parses[v] && !in.Attested {
			p.lost[v] = true
		}
	}
}

// get returns the packument of name, through the mirror's documents: from
// memory while it is fresh, else fetched once however many ask, else
// stale from the cache when the upstream fails. The result is the
// handler's own copy, with the fetch time and staleness of this answer.
func (h *Handler) get(ctx context.Context, name string) (*packument, error) {
	key := "npm:packument:" + h.upstream.String() + name
	doc, err := h.packuments.Get(ctx, key, h.upstreamURL(escapeName(name)), "application/json", func(b []byte) (*packument, error) {
		return parsePackument(name, b, time.Time{})
	})
	if err != nil {
		return nil, err
	}
	p := *doc.Value
	p.fetched, p.stale = doc.Fetched, doc.Stale
	return &p, nil
}

// decide asks the policy about version v of p.
func (h *Handler) decide(ctx context.Context, p *packument, v string) (string, policies.Decision) {
	in := p.Versions[v]
	return h.env.Decide(ctx, policies.PackageRequest{Ecosystem: Ecosystem, Name: p.Name, Version: v,
		Source: in.Tarball, Registry: h.upstream.String(), Published: in.Published, InstallScripts: len(in.Scripts) > 0,
		ProvenanceLost: p.lostProvenance(v)})
}

// repairTags points each dist-tag that names a removed version at the
// highest remaining version below it (a release for a release), and drops
// a tag with none.
func (p *packument) repairTags(removed map[string]fetch.Removal) map[string]string {
	tags := make(map[string]string, len(p.Tags))
	for tag, v := range p.Tags {
		if _, gone := removed[v]; !gone {
			tags[tag] = v
			continue
		}
		if nv := p.below(v, removed); nv != "" {
			tags[tag] = nv
		}
	}
	return tags
}

// below is the highest version lower than v that is not removed, a
// release when v is one.
func (p *packument) below(v string, removed map[string]fetch.Removal) string {
	pv, err := semver.ParseVersion(v, semver.NPM)
	if err != nil {
		return ""
	}
	for i := len(p.order) - 1; i >= 0; i-- {
		o := p.order[i]
		if _, gone := removed[o]; gone || compare(o, v) >= 0 {
			continue
		}
		ov, _ := semver.ParseVersion(o, semver.NPM)
		if !pv.Prerelease() && ov.Prerelease() {
			continue
		}
		return o
	}
	return ""
}

// tarballPath is the mirror path of a version's tarball.
func (h *Handler) tarballPath(name, tarball string) string {
	return h.prefix + escapeName(name) + "/-/" + path.Base(tarball)
}

// PublicRegistry is the public npm registry's origin, as npm names it in
// lockfiles: the host that npm's replace-registry-host (default "npmjs")
// rewrites onto the registry it is configured with.
const PublicRegistry = "https://registry.npmjs.org/"

// tarballBase is where the packument served for r names its tarballs.
// For an npm client (User-Agent npm/…) of a mirror of the public registry
// it is PublicRegistry: npm fetches such a tarball through the registry it
// is configured with (the mirror, with the mirror's path prefix kept), and
// its lockfiles name registry.npmjs.org, not the mirror's address, so that
// `npm ci` works later anywhere. Other clients (yarn 1, pnpm, bun) fetch
// dist.tarball as it is, and get the mirror's own URL, "http://HOST".
func (h *Handler) tarballBase(r *http.Request) string {
	if h.upstream.String() == PublicRegistry && strings.HasPrefix(r.Header.Get("User-Agent"), "npm/") {
		return PublicRegistry
	}
	return "http://" + r.Host
}

// tarballURL is the URL of a version's tarball in a packument whose
// tarballs are beneath base (tarballBase): the registry's own path on
// PublicRegistry, else the mirror's.
func (h *Handler) tarballURL(base, name, tarball string) string {
	if base == PublicRegistry {
		return PublicRegistry + name + "/-/" + path.Base(tarball)
	}
	return base + h.tarballPath(name, tarball)
}

// servePackument serves a filtered, rewritten packument.
func (h *Handler) servePackument(w http.ResponseWriter, r *http.Request, name string) error {
	p, err := h.get(r.Context(), name)
	if err != nil {
		return err
	}
	v := h.verdicts(r.Context(), p)
	h.recordFilter(r.Context(), p, v)
	abbrev := strings.Contains(r.Header.Get("Accept"), abbreviated)
	b, err := h.rendered(p, v, abbrev, h.tarballBase(r))
	if err != nil {
		return err
	}
	ct := "application/json"
	if abbrev {
		ct = abbreviated
	}
	w.Header().Set("Content-Type", ct)
	if h.upstream.String() == PublicRegistry {
		w.Header().Add("Vary", "User-Agent") // tarballBase
	}
	if p.stale {
		w.Header().Set("Warning", `110 sandtrail "stale: the upstream registry could not be reached"`)
	}
	serveBytes(w, r, b)
	return nil
}

// serveBytes writes b, whole: one write of a rendered packument, where
// http.ServeContent copies it in 32 kB pieces (ranges, which npm does not
// ask of packuments, are not served).
func serveBytes(w http.ResponseWriter, r *http.Request, b []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// serveVersion serves the document of one version of name, named by its
// version or a dist-tag, from the same filtered, rewritten packument as
// servePackument: a version the policy removed is not found, and a tag
// names what it names there.
func (h *Handler) serveVersion(w http.ResponseWriter, r *http.Request, name, ver string) error {
	p, err := h.get(r.Context(), name)
	if err != nil {
		return err
	}
	vs := h.verdicts(r.Context(), p)
	h.recordFilter(r.Context(), p, vs)
	if v, ok := vs.tags[ver]; ok {
		ver = v
	}
	in, ok := p.Versions[ver]
	if _, gone := vs.removed[ver]; !ok || gone {
		if gone {
			rm := vs.removed[ver]
			return fetch.Errorf(http.StatusNotFound, rm.Outcome, nil, "%s@%s is not served: %s", name, event.Clip(ver, 120), rm.Reason)
		}
		return fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no version or tag %q", name, event.Clip(ver, 120))
	}
	b, err := h.rewriteVersion(p, ver, in.Raw, false, h.tarballBase(r))
	if err != nil {
		return fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "rewriting %s@%s", p.Name, ver)
	}
	w.Header().Set("Content-Type", "application/json")
	if h.upstream.String() == PublicRegistry {
		w.Header().Add("Vary", "User-Agent") // tarballBase
	}
	if p.stale {
		w.Header().Set("Warning", `110 sandtrail "stale: the upstream registry could not be reached"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	return nil
}

// abbrevFields are the fields of a version in the abbreviated packument.
var abbrevFields = []string{"name", "version", "deprecated", "dependencies", "optionalDependencies", "devDependencies",
	"bundleDependencies", "bundledDependencies", "peerDependencies", "peerDependenciesMeta", "acceptDependencies",
	"bin", "directories", "dist", "engines", "_hasShrinkwrap", "hasInstallScript", "cpu", "os", "libc", "funding", "license"}

// render writes p without the removed versions, its tarball URLs beneath
// base (tarballBase).
func (h *Handler) render(p *packument, removed map[string]fetch.Removal, abbrev bool, base string) ([]byte, error) {
	versions := make(map[string]json.RawMessage, len(p.Versions))
	for v, in := range p.Versions {
		if _, gone := removed[v]; gone {
			continue
		}
		nv, err := h.rewriteVersion(p, v, in.Raw, abbrev, base)
		if err != nil {
			return nil, fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, err, "rewriting %s@%s", p.Name, v)
		}
		versions[v] = nv
	}
	out := map[string]any{"versions": versions, "dist-tags": p.repairTags(removed)}
	if abbrev {
		out["name"] = p.Name
		if m, ok := p.Top["modified"]; ok {
			out["modified"] = m
		}
	} else {
		for k, v := range p.Top {
			if k != "versions" && k != "dist-tags" && k != "time" {
				out[k] = v
			}
		}
		out["time"] = p.times(removed)
	}
	return json.Marshal(out)
}

// times is p's time map without the removed versions.
func (p *packument) times(removed map[string]fetch.Removal) map[string]json.RawMessage {
	var all map[string]json.RawMessage
	_ = json.Unmarshal(p.Top["time"], &all)
	for v := range removed {
		delete(all, v)
	}
	return all
}

// rewriteVersion points a version's tarball beneath base (tarballURL) and, for the
// abbreviated form, keeps only its fields (with hasInstallScript set when
// npm would run a script).
func (h *Handler) rewriteVersion(p *packument, v string, raw json.RawMessage, abbrev bool, base string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var dist map[string]json.RawMessage
	if err := json.Unmarshal(m["dist"], &dist); err != nil {
		return nil, errors.New("no dist")
	}
	t, _ := json.Marshal(h.tarballURL(base, p.Name, p.Versions[v].Tarball))
	// dist.attestations stays: npm rewrites its URL onto the registry it
	// is configured with, the mirror, which proxies it.
	dist["tarball"] = t
	m["dist"], _ = json.Marshal(dist)
	if abbrev {
		keep := make(map[string]json.RawMessage, len(abbrevFields))
		for _, f := range abbrevFields {
			if x, ok := m[f]; ok {
				keep[f] = x
			}
		}
		if len(p.Versions[v].Scripts) > 0 {
			keep["hasInstallScript"] = json.RawMessage("true")
		}
		m = keep
	}
	return json.Marshal(m)
}
