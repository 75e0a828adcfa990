package npm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// maxVerdictAge bounds how long the decisions on a packument are kept
// when nothing ends them sooner: the reasons they give say how old a
// version is, to the minute.
const maxVerdictAge = time.Minute

// verdicts are the policy's decisions on every version of one parsed
// packument, made once under one generation of the policy (fetch.Env's
// Generation), and what follows from them: the versions removed and the
// dist-tags repaired. They hold until expires: the earliest time one of
// the decisions may change by the passing of time alone (a version's
// cooldown ending: policies.Decision.Until), or maxVerdictAge.
type verdicts struct {
	gen     fetch.Generation
	expires time.Time
	decided map[string]verdict // by version
	removed map[string]fetch.Removal
	// removals are removed's values, by version; gone their versions
	// joined, what the rendered bytes depend on.
	removals []fetch.Removal
	gone     string
	tags     map[string]string // the dist-tags, repaired
}

// verdict is the policy's decision on one version, and its outcome.
type verdict struct {
	outcome string
	d       policies.Decision
}

// memo is what the handler derives from one parsed packument, shared by
// every copy of it (get): its identity among the handler's renderings,
// the verdicts in force, decided at most once at a time, and its
// versions' facts (versionFacts).
type memo struct {
	doc    uint64
	v      atomic.Pointer[verdicts]
	decide sync.Mutex // held while deciding
	facts  sync.Map   // version → *versionFacts
}

// docs numbers the parsed packuments (memo.doc).
var docs atomic.Uint64

func newMemo() *memo { return &memo{doc: docs.Add(1)} }

// renderKey is what a rendering depends on: the parsed packument, its
// form, the base of its tarball URLs and the versions removed.
type renderKey struct {
	doc    uint64
	abbrev bool
	base   string
	gone   string
}

// valid reports whether v may answer now under the generation gen.
func (v *verdicts) valid(gen fetch.Generation, now time.Time) bool {
	return v != nil && v.gen == gen && now.Before(v.expires)
}

// verdicts returns the decisions on p's versions: those in force, else
// made now (by one caller, however many ask at once). The generation is
// read before deciding, so that a reload in between only makes the next
// caller decide again.
func (h *Handler) verdicts(ctx context.Context, p *packument) *verdicts {
	gen, now := h.env.Generation(), h.env.Now()
	if v := p.memo.v.Load(); v.valid(gen, now) {
		return v
	}
	p.memo.decide.Lock()
	defer p.memo.decide.Unlock()
	if v := p.memo.v.Load(); v.valid(gen, now) {
		return v
	}
	v := h.decideAll(ctx, p, gen, now)
	p.memo.v.Store(v)
	return v
}

// decideAll asks the policy about every version of p, at now, under gen.
func (h *Handler) decideAll(ctx context.Context, p *packument, gen fetch.Generation, now time.Time) *verdicts {
	v := &verdicts{gen: gen, expires: now.Add(maxVerdictAge), decided: make(map[string]verdict, len(p.Versions)),
		removed: map[string]fetch.Removal{}}
	for ver := range p.Versions {
		out, d := h.decide(ctx, p, ver)
		v.decided[ver] = verdict{out, d}
		if !d.Until.IsZero() && d.Until.Before(v.expires) {
			v.expires = d.Until
		}
		if out != fetch.Served {
			v.removed[ver] = fetch.Removal{Version: ver, Outcome: out, Rule: d.Rule, Reason: d.Reason}
		}
	}
	gone := make([]string, 0, len(v.removed))
	for ver, rm := range v.removed {
		gone = append(gone, ver)
		v.removals = append(v.removals, rm)
	}
	slices.Sort(gone)
	slices.SortFunc(v.removals, func(a, b fetch.Removal) int { return strings.Compare(a.Version, b.Version) })
	v.gone = strings.Join(gone, ",")
	v.tags = p.repairTags(v.removed)
	return v
}

// rendered is render, remembered by all that the bytes depend on
// (renderKey), and rendered once however many ask for it at the same
// time. The handler keeps at most maxRendered bytes of renderings, and
// forgets them all past it.
func (h *Handler) rendered(p *packument, v *verdicts, abbrev bool, base string) ([]byte, error) {
	key := renderKey{doc: p.memo.doc, abbrev: abbrev, base: base, gone: v.gone}
	h.mu.Lock()
	b, ok := h.renders[key]
	h.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err, _ := h.rendering.Do(fmt.Sprintf("%d\x00%v\x00%s\x00%s", key.doc, key.abbrev, key.base, key.gone), func() ([]byte, error) {
		h.mu.Lock()
		b, ok := h.renders[key]
		h.mu.Unlock()
		if ok {
			return b, nil
		}
		b, err := h.render(p, v.removed, abbrev, base)
		if err != nil {
			return nil, err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.renderBytes+len(b) > maxRendered {
			clear(h.renders)
			h.renderBytes = 0
		}
		h.renders[key] = b
		h.renderBytes += len(b)
		return b, nil
	})
	return b, err
}

// maxRendered bounds the bytes of the rendered packuments kept.
const maxRendered = 64 << 20

// recordFilter records, once per session and package, the versions the
// policy removed from what the client was served.
func (h *Handler) recordFilter(ctx context.Context, p *packument, v *verdicts) {
	if len(v.removals) == 0 {
		return
	}
	h.filterLog.Record(h.env, &fetch.Filtered{Ecosystem: Ecosystem, Name: p.Name, Registry: h.upstream.String(),
		Client: ctxClient(ctx), Removed: v.removals})
}
