package npm

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
)

// RulePublish is the rule of the mirror's record of a publish it refused:
// a pkg.fetch with outcome blocked, which the package view reads
// (pkgview.PublishRefusedRule, install_script_publish).
const RulePublish = "mirror.publish"

// WriteError writes err as fetch.Write does. A request that would change
// the registry (PUT, POST, PATCH or DELETE: npm publish, unpublish,
// dist-tag, deprecate) is refused for its method, since the mirror serves
// GET and HEAD only; the refusal is recorded first, as a pkg.fetch with
// outcome blocked and rule RulePublish naming the package of the request's
// path, with the client and its process, so that the record holds the
// attempt: a package's install script republishing what a stolen token
// reaches (the npm worms of 2025) is seen whatever it sent.
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) *fetch.Error {
	if e := fetch.AsError(err); e.Code == "method" && changesRegistry(r.Method) {
		h.recordPublish(r)
	}
	return fetch.Write(w, err)
}

// changesRegistry reports whether an HTTP method is one a registry
// changes its packages by.
func changesRegistry(method string) bool {
	switch method {
	case http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// recordPublish records a refused publish of r.
func (h *Handler) recordPublish(r *http.Request) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), h.prefix)
	h.env.Record(&fetch.Record{Ecosystem: Ecosystem, Name: publishedName(rest), URL: h.upstreamURL(rest),
		Registry: h.upstream.String(), Outcome: fetch.Blocked, Verdict: "block", Rule: RulePublish,
		Reason: fmt.Sprintf("%s %s%s refused: the mirror does not publish (it serves GET and HEAD only)", r.Method,
			h.prefix, event.Clip(rest, 200)),
		Client: fetch.ClientOf(r.Context())})
}

// publishedName is the package a publish's path (beneath the prefix,
// escaped) names: <name> (npm publish, deprecate), <name>/-rev/<rev>
// (unpublish), -/package/<name>/dist-tags/<tag> (dist-tag); "" when it
// names no valid package name.
func publishedName(p string) string {
	un, err := url.PathUnescape(p)
	if err != nil {
		return ""
	}
	var name string
	if rest, ok := strings.CutPrefix(un, "-/package/"); ok {
		name, _, _ = strings.Cut(rest, "/dist-tags")
	} else {
		name, _, _ = strings.Cut(un, "/-")
	}
	if CheckName(name) != nil {
		return ""
	}
	return name
}
