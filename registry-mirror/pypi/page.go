package pypi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// upstreamAccept asks the upstream for PEP 691 JSON only.
const upstreamAccept = typeJSON

// project returns the parsed page of project name (in normal form).
func (h *Handler) project(ctx context.Context, name string) (fetch.Doc[*listing.Project], error) {
	u := h.upstream.JoinPath(name + "/")
	return h.projects.Get(ctx, "pypi:project:"+u.String(), u.String(), upstreamAccept, func(b []byte) (*listing.Project, error) {
		return listing.ParseProject(name, u, b)
	})
}

// decide asks the policy about one file: its version, published when the
// file was uploaded (a file added later to an old release is as new as
// its upload), from its own URL; an sdist runs the package's code when it
// is built.
func (h *Handler) decide(ctx context.Context, name string, f *listing.ProjectFile) (string, policies.Decision) {
	return h.env.Decide(ctx, policies.PackageRequest{Ecosystem: Ecosystem, Name: name, Version: f.Version, Source: f.URL,
		Registry: h.upstream.String(), Published: f.Uploaded, InstallScripts: f.Sdist})
}

// filter returns the files of p the mirror serves, and the versions of
// the files the policy refused (one removal per version and rule). A file
// without a sha256 is never served.
func (h *Handler) filter(ctx context.Context, p *listing.Project) ([]*listing.ProjectFile, []fetch.Removal) {
	var served []*listing.ProjectFile
	var removed []fetch.Removal
	seen := map[string]bool{}
	for _, f := range p.Files {
		out, d := h.decide(ctx, p.Name, f)
		if out == fetch.Served {
			if f.SHA256 != "" {
				served = append(served, f)
			}
			continue
		}
		if k := f.Version + "\x00" + out + "\x00" + d.Rule; !seen[k] {
			seen[k] = true
			removed = append(removed, fetch.Removal{Version: f.Version, Outcome: out, Rule: d.Rule, Reason: d.Reason})
		}
	}
	return served, removed
}

// serveProject serves the filtered, rewritten page of project name.
func (h *Handler) serveProject(w http.ResponseWriter, r *http.Request, name string) error {
	ct, err := negotiate(r)
	if err != nil {
		return err
	}
	doc, err := h.project(r.Context(), name)
	if err != nil {
		return err
	}
	files, removed := h.filter(r.Context(), doc.Value)
	h.filters.Record(h.env, &fetch.Filtered{Ecosystem: Ecosystem, Name: name, Registry: h.upstream.String(),
		Client: fetch.ClientOf(r.Context()), Removed: removed})
	return writeDoc(w, r, ct, h.page(doc.Value, files), pageHTML, doc.Stale)
}

// serveRoot serves the index of projects.
func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request) error {
	ct, err := negotiate(r)
	if err != nil {
		return err
	}
	doc, err := h.roots.Get(r.Context(), "pypi:root:"+h.upstream.String(), h.upstream.String(), upstreamAccept, func(b []byte) ([]string, error) {
		return parseRoot(h.eco, b)
	})
	if err != nil {
		return err
	}
	idx := outIndex{Meta: outMeta{APIVersion: "1.0"}}
	for _, n := range doc.Value {
		idx.Projects = append(idx.Projects, outProject{Name: n, Href: url.PathEscape(h.eco.NormalizeName(n)) + "/"})
	}
	return writeDoc(w, r, ct, idx, rootHTML, doc.Stale)
}

// writeDoc writes v as a page of content type ct: as JSON, or in the
// HTML of tmpl.
func writeDoc(w http.ResponseWriter, r *http.Request, ct string, v any, tmpl *template.Template, stale bool) error {
	var b bytes.Buffer
	var err error
	if ct == typeJSON {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		err = enc.Encode(v)
	} else {
		err = tmpl.Execute(&b, v)
	}
	if err != nil {
		return fmt.Errorf("rendering a page: %w", err)
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Vary", "Accept")
	if stale {
		w.Header().Set("Warning", `110 sandtrail "stale: the upstream index could not be reached"`)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b.Bytes()))
	return nil
}
