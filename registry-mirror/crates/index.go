package crates

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/verify"
	"github.com/sandtrail/sandtrail/resolver/cargo"
)

// index is a parsed index file.
type index struct {
	name    string // the file's name: the crate's, lower case
	fetched time.Time
	stale   bool // served from the cache because the upstream failed
	body    []byte
	lines   []line // the lines that parse, in the file's order
	bad     int    // lines that do not parse, dropped
}

// line is what the mirror needs of one version's index line.
type line struct {
	start, end int // the line in the body, without its newline
	name, vers string
	cksum      string // hex, as the index and Cargo.lock write it
	sum        verify.Digest
	published  time.Time // zero: the line has no pubtime
}

// record is the part of an index line the mirror reads; the rest passes
// through as the upstream wrote it.
type record struct {
	Name    string `json:"name"`
	Vers    string `json:"vers"`
	Cksum   string `json:"cksum"`
	Pubtime string `json:"pubtime"`
}

// errBlank marks a blank line, which is neither a version nor malformed.
var errBlank = errors.New("crates: blank line")

// parseIndex reads the index file of crate name. It never fails: the lines
// that do not parse, and every line of a version listed more than once,
// are dropped and counted in bad.
func parseIndex(name string, b []byte) *index {
	idx := &index{name: name, body: b}
	count := map[string]int{} // version without build metadata → lines
	for start := 0; start < len(b); {
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += start
		}
		l, err := parseLine(name, b[start:end])
		switch {
		case errors.Is(err, errBlank):
		case err != nil:
			idx.bad++
		default:
			l.start, l.end = start, end
			idx.lines = append(idx.lines, l)
			count[withoutBuild(l.vers)]++
		}
		start = end + 1
	}
	kept := idx.lines[:0]
	for _, l := range idx.lines {
		if count[withoutBuild(l.vers)] > 1 {
			idx.bad++
			continue
		}
		kept = append(kept, l)
	}
	idx.lines = kept
	return idx
}

// parseLine reads one line of the index file of crate file.
func parseLine(file string, raw []byte) (line, error) {
	raw = bytes.TrimRight(raw, "\r \t")
	if len(bytes.TrimSpace(raw)) == 0 {
		return line{}, errBlank
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return line{}, fmt.Errorf("crates: index line of %s: %w", file, err)
	}
	if strings.ToLower(r.Name) != file || CheckName(r.Name) != nil {
		return line{}, fmt.Errorf("crates: index line of %s names the crate %q", file, render.Clip(r.Name, 120))
	}
	if _, err := cargo.ParseVersion(r.Vers); err != nil {
		return line{}, fmt.Errorf("crates: index line of %s: %w", file, err)
	}
	sum, err := verify.Hex(verify.SHA256, r.Cksum)
	if err != nil {
		return line{}, fmt.Errorf("crates: index line of %s %s: cksum: %w", file, r.Vers, err)
	}
	l := line{name: r.Name, vers: r.Vers, cksum: strings.ToLower(r.Cksum), sum: sum}
	if r.Pubtime != "" {
		if l.published, err = time.Parse(time.RFC3339, r.Pubtime); err != nil {
			return line{}, fmt.Errorf("crates: index line of %s %s: pubtime: %w", file, r.Vers, err)
		}
	}
	return l, nil
}

// withoutBuild is a version without its build metadata, which semver
// precedence (and so cargo) ignores.
func withoutBuild(v string) string {
	v, _, _ = strings.Cut(v, "+")
	return v
}

// version finds the line of version of crate name. A version with no
// line is a 404, unless lines of the file did not parse: then it may be
// one of those, and the refusal is the upstream's fault (a 502).
func (idx *index) version(name, version string) (*line, error) {
	for i := range idx.lines {
		if l := &idx.lines[i]; l.vers == version && strings.EqualFold(l.name, name) {
			return l, nil
		}
	}
	if idx.bad > 0 {
		return nil, fetch.Errorf(http.StatusBadGateway, fetch.UpstreamError, nil,
			"the index file of %s has %d lines that do not parse, and no valid line for %s", idx.name, idx.bad, render.Clip(version, 120))
	}
	return nil, fetch.Errorf(http.StatusNotFound, "not_found", nil, "%s has no version %s", idx.name, render.Clip(version, 120))
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
			if fresh = parseIndex(name, b); len(fresh.lines) == 0 && fresh.bad > 0 {
				return fmt.Errorf("%w: %d lines", ErrNoLines, fresh.bad)
			}
			return nil
		}
		u := h.upstream.String() + indexPath(name)
		m, stale, err := h.metas.Get(ctx, "crates:index:"+u, u, "", check)
		if err != nil {
			return nil, err
		}
		if fresh == nil || stale {
			fresh = parseIndex(name, m.Body)
		}
		fresh.fetched, fresh.stale = m.Fetched, stale
		if fresh.bad > 0 {
			h.env.Log.Warn("index file has lines that do not parse, dropped", "crate", name, "lines", fresh.bad)
		}
		h.remember(fresh)
		return fresh, nil
	})
	return idx, err
}

// remember keeps idx in memory, dropping others past maxParsedBytes.
func (h *Handler) remember(idx *index) {
	size := int64(len(idx.body))
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.parsed[idx.name]; old != nil {
		delete(h.parsed, idx.name)
		h.bytes -= int64(len(old.body))
	}
	for k, o := range h.parsed {
		if h.bytes+size <= maxParsedBytes {
			break
		}
		delete(h.parsed, k)
		h.bytes -= int64(len(o.body))
	}
	if size <= maxParsedBytes {
		h.parsed[idx.name] = idx
		h.bytes += size
	}
}

// decide asks the policy about the version of line l.
func (h *Handler) decide(ctx context.Context, cfg *config, l *line) (string, policies.Decision) {
	return h.env.Decide(ctx, policies.PackageRequest{Ecosystem: Ecosystem, Name: l.name, Version: l.vers,
		Source: downloadURL(cfg.DL, l.name, l.vers, l.cksum), Registry: h.upstream.String(), Published: l.published})
}

// filter returns the versions of idx the policy removes.
func (h *Handler) filter(ctx context.Context, cfg *config, idx *index) map[string]fetch.Removal {
	removed := map[string]fetch.Removal{}
	for i := range idx.lines {
		l := &idx.lines[i]
		if out, d := h.decide(ctx, cfg, l); out != fetch.Served {
			removed[l.vers] = fetch.Removal{Version: l.vers, Outcome: out, Rule: d.Rule, Reason: d.Reason}
		}
	}
	return removed
}

// render is the index file as served: the lines that parse, without those
// of the removed versions, each as the upstream wrote it.
func (idx *index) render(removed map[string]fetch.Removal) []byte {
	var b bytes.Buffer
	b.Grow(len(idx.body))
	for _, l := range idx.lines {
		if _, gone := removed[l.vers]; !gone {
			b.Write(idx.body[l.start:l.end])
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
	f := &fetch.Filtered{Ecosystem: Ecosystem, Name: idx.lines[0].name, Registry: h.upstream.String(), Client: fetch.ClientOf(ctx)}
	for _, r := range removed {
		f.Removed = append(f.Removed, r)
	}
	h.filters.Record(h.env, f)
}
