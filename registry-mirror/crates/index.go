package crates

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// index is a parsed index file, as the mirror holds it.
type index struct {
	*listing.CrateIndex
	fetched time.Time
	stale   bool // served from the cache because the upstream failed
}

// parseIndex reads the index file of crate name (listing.ParseCrateIndex:
// the lines that do not parse are dropped and counted).
func parseIndex(name string, b []byte) *index {
	return &index{CrateIndex: listing.ParseCrateIndex(name, b)}
}

// version finds the line of version of crate name. A version with no
// line is a 404, unless lines of the file did not parse: then it may be
// one of those, and the refusal is the upstream's fault (a 502).
func (idx *index) version(name, version string) (*listing.CrateLine, error) {
	for i := range idx.Lines {
		if l := &idx.Lines[i]; l.Vers == version && strings.EqualFold(l.Name, name) {
			return l, nil
		}
	}
	if idx.Bad > 0 {
		return nil, fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, idx.Err,
			"the index file of %s has %d lines that do not parse, and no valid line for %s", idx.Name, idx.Bad, event.Clip(version, 120))
	}
	return nil, fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no version %s", idx.Name, event.Clip(version, 120))
}

// get returns the index file of crate name (lower case): from memory
// while it is fresh, else through the cache.
func (h *Handler) get(ctx context.Context, name string) (*index, error) {
	h.mu.Lock()
	idx := h.parsed[name]
	h.mu.Unlock()
	if idx != nil && !idx.stale && h.env.Now().Sub(idx.fetched) < h.env.MetaTTL {
		return idx, nil
	}
	idx, err, _ := h.indexes.Do(name, func() (*index, error) {
		var fresh *index
		check := func(b []byte) error {
			if fresh = parseIndex(name, b); len(fresh.Lines) == 0 && fresh.Bad > 0 {
				return fmt.Errorf("%w: %d lines: %w", ErrNoLines, fresh.Bad, fresh.Err)
			}
			return nil
		}
		u := h.upstream.String() + listing.CrateIndexPath(name)
		m, stale, err := h.metas.Get(ctx, "crates:index:"+u, u, "", check)
		if err != nil {
			return nil, err
		}
		if fresh == nil || stale {
			fresh = parseIndex(name, m.Body)
		}
		fresh.fetched, fresh.stale = m.Fetched, stale
		if fresh.Bad > 0 {
			h.env.Log.Warn("index file has lines that do not parse, dropped", "crate", name, "lines", fresh.Bad, "first", fresh.Err)
		}
		h.remember(fresh)
		return fresh, nil
	})
	return idx, err
}

// remember keeps idx in memory, dropping others past maxParsedBytes.
func (h *Handler) remember(idx *index) {
	size := int64(len(idx.Body))
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.parsed[idx.Name]; old != nil {
		delete(h.parsed, idx.Name)
		h.bytes -= int64(len(old.Body))
	}
	for k, o := range h.parsed {
		if h.bytes+size <= maxParsedBytes {
			break
		}
		delete(h.parsed, k)
		h.bytes -= int64(len(o.Body))
	}
	if size <= maxParsedBytes {
		h.parsed[idx.Name] = idx
		h.bytes += size
	}
}

// decide asks the policy about the version of line l.
func (h *Handler) decide(ctx context.Context, cfg *listing.CrateConfig, l *listing.CrateLine) (string, policies.Decision) {
	return h.env.Decide(ctx, policies.PackageRequest{Ecosystem: Ecosystem, Name: l.Name, Version: l.Vers,
		Source: listing.CrateDownloadURL(cfg.DL, l.Name, l.Vers, l.Cksum), Registry: h.upstream.String(), Published: l.Published})
}

// filter returns the versions of idx the policy removes.
func (h *Handler) filter(ctx context.Context, cfg *listing.CrateConfig, idx *index) map[string]fetch.Removal {
	removed := map[string]fetch.Removal{}
	for i := range idx.Lines {
		l := &idx.Lines[i]
		if out, d := h.decide(ctx, cfg, l); out != fetch.Served {
			removed[l.Vers] = fetch.Removal{Version: l.Vers, Outcome: out, Rule: d.Rule, Reason: d.Reason}
		}
	}
	return removed
}

// render is the index file as served: the lines that parse, without those
// of the removed versions, each as the upstream wrote it.
func (idx *index) render(removed map[string]fetch.Removal) []byte {
	var b bytes.Buffer
	b.Grow(len(idx.Body))
	for _, l := range idx.Lines {
		if _, gone := removed[l.Vers]; !gone {
			b.Write(idx.Body[l.Start:l.End])
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// serveIndex serves the filtered index file of crate name, with an ETag
// (its sha256) for cargo's revalidation.
func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request, name string) error {
	ctx := r.Context()
	cfg, _, err := h.config(ctx)
	if err != nil {
		return err
	}
	idx, err := h.get(ctx, name)
	if err != nil {
		return err
	}
	removed := h.filter(ctx, cfg, idx)
	h.recordFilter(ctx, idx, removed)
	b := idx.render(removed)
	sum := sha256.Sum256(b)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	if idx.stale {
		w.Header().Set("Warning", `110 sandtrail "stale: the upstream registry could not be reached"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	return nil
}

// recordFilter records, once per session and crate, the versions the
// policy removed from what the client was served.
func (h *Handler) recordFilter(ctx context.Context, idx *index, removed map[string]fetch.Removal) {
	if len(removed) == 0 {
		return
	}
	f := &fetch.Filtered{Ecosystem: Ecosystem, Name: idx.Lines[0].Name, Registry: h.upstream.String(), Client: fetch.ClientOf(ctx)}
	for _, r := range removed {
		f.Removed = append(f.Removed, r)
	}
	h.filters.Record(h.env, f)
}
