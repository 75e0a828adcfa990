// Package pypi is the mirror's Python package index. Beneath its prefix it
// serves:
//
//   - simple/, the index of projects, and simple/<project>/, a project's
//     page, each as PEP 691 JSON (Accept:
//     application/vnd.pypi.simple.v1+json) or PEP 503 HTML, chosen by
//     content negotiation with q-values; a name that is not in its PEP 503
//     normal form is redirected to it, as PyPI does;
//   - files/<project>/<filename>, the project's files, and the PEP 658
//     metadata file (<filename>.metadata) of each that has one.
//
// The upstream is a PEP 691 JSON simple index (PyPI's, by default), whose
// files may live on another host (files.pythonhosted.org). Project pages
// are rewritten: each file's URL points at the mirror, the versions the
// policy refuses (blocklist, cooldown driven by PEP 700's upload-time,
// unknown sources) are removed, and yanked status (PEP 592), requires-python
// and core metadata (PEP 658/714) are kept.
//
// Trust model: the upstream's pages are untrusted input, bounded in size
// and parsed strictly (by resolver/listing's ParseProject, the one parser
// of the format, which policies/release shares: a file it cannot
// attribute to a version of the project is left out); the client is
// untrusted too. A file is fetched only
// from the URL that the upstream's own page gives for that filename, never
// from a URL a client names, so a client cannot make the mirror fetch an
// arbitrary URL. Every file (and metadata file) is checked against the
// sha256 of the upstream's page as it streams, and no byte is served
// unless it matched: a file whose page gives no sha256 is refused (fail
// closed), as is core metadata without one, which is then not advertised.
// Each file served or refused is a pkg.fetch record; a metadata file is
// recorded only when it is refused, since it is not what gets installed.
package pypi

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// ErrBadName: a project name that is not a valid PEP 508 name.
var ErrBadName = errors.New("pypi: not a valid project name")

// DefaultUpstream is PyPI's simple index.
const DefaultUpstream = "https://pypi.org/simple/"

// Ecosystem is the purl type of Python packages.
const Ecosystem = resolver.PyPI

// maxParsed bounds the parsed project pages kept in memory.
const maxParsed = 512

// Handler serves one upstream index.
type Handler struct {
	env      *fetch.Env
	eco      *resolver.Ecosystem
	upstream *url.URL
	prefix   string // the mirror's path prefix, for rewritten URLs

	projects  *fetch.Docs[*listing.Project]
	roots     *fetch.Docs[[]string]
	artifacts *fetch.Artifacts
	filters   fetch.FilterLog
}

// New returns the handler for upstream, served beneath prefix ("/pypi/").
func New(env *fetch.Env, upstream *url.URL, prefix string) (*Handler, error) {
	eco, err := resolver.Lookup(Ecosystem)
	if err != nil {
		return nil, err
	}
	u := *upstream
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return &Handler{env: env, eco: eco, upstream: &u, prefix: prefix, projects: fetch.NewDocs[*listing.Project](env, maxParsed),
		roots: fetch.NewDocs[[]string](env, 1), artifacts: fetch.NewArtifacts(env)}, nil
}

// Serve serves path, beneath the prefix, still escaped.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, path string) error {
	switch {
	case path == "simple":
		return h.redirect(w, r, "simple/")
	case path == "simple/":
		return h.serveRoot(w, r)
	case strings.HasPrefix(path, "simple/"):
		return h.serveProjectPath(w, r, strings.TrimPrefix(path, "simple/"))
	case strings.HasPrefix(path, "files/"):
		name, file, err := h.splitFilePath(strings.TrimPrefix(path, "files/"))
		if err != nil {
			return err
		}
		return h.serveFile(w, r, name, file)
	}
	return fetch.Errorf(http.StatusNotFound, "not_found", nil, "the mirror's PyPI index serves %ssimple/ and %sfiles/", h.prefix, h.prefix)
}

// serveProjectPath serves simple/<project>/, redirecting a name not in
// its normal form, or without the trailing slash, to the normal path.
func (h *Handler) serveProjectPath(w http.ResponseWriter, r *http.Request, rest string) error {
	raw, slash := strings.CutSuffix(rest, "/")
	name, err := url.PathUnescape(raw)
	if err != nil || strings.Contains(name, "/") {
		return fetch.Errorf(http.StatusBadRequest, "bad_name", err, "bad project path %.120q", rest)
	}
	norm, err := h.checkName(name)
	if err != nil {
		return err
	}
	if norm != name || !slash {
		return h.redirect(w, r, "simple/"+norm+"/")
	}
	return h.serveProject(w, r, norm)
}

// splitFilePath reads "<project>/<filename>": the project in its normal
// form (as the mirror's own pages write it) and a plain file name.
func (h *Handler) splitFilePath(p string) (name, file string, err error) {
	rawName, rawFile, ok := strings.Cut(p, "/")
	if ok {
		name, err = url.PathUnescape(rawName)
	}
	if ok && err == nil {
		file, err = url.PathUnescape(rawFile)
	}
	if !ok || err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "bad file path %.120q", p)
	}
	if norm, err := h.checkName(name); err != nil || norm != name {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "bad project name %.120q in a file path", name)
	}
	if err := listing.CheckFilename(file); err != nil {
		return "", "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "%v", err)
	}
	return name, file, nil
}

// normalName is a PEP 503 normal name: what a valid PEP 508 name becomes.
var normalName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// checkName returns the normal form of a project name, or a 400 when it
// is not a valid PEP 508 name.
func (h *Handler) checkName(name string) (string, error) {
	err := h.eco.CheckName(name)
	norm := h.eco.NormalizeName(name)
	if err == nil && !normalName.MatchString(norm) {
		err = ErrBadName
	}
	if err != nil {
		return "", fetch.Errorf(http.StatusBadRequest, "bad_name", err, "%.120q is not a valid project name", name)
	}
	return norm, nil
}

// redirect sends the client to path beneath the prefix, keeping the
// query (PEP 691's format parameter).
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, path string) error {
	to := h.prefix + path
	if r.URL.RawQuery != "" {
		to += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, to, http.StatusMovedPermanently)
	return nil
}
