package pypi

import (
	"encoding/json"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

// The media types of the simple API (PEP 691).
const (
	typeJSON = "application/vnd.pypi.simple.v1+json"
	typeHTML = "application/vnd.pypi.simple.v1+html"
	typeText = "text/html"
)

// offers are the forms the mirror serves, preferred first when a client
// accepts several equally.
var offers = []string{typeJSON, typeHTML, typeText}

// aliases name an offer by another media type.
var aliases = map[string]string{
	"application/vnd.pypi.simple.latest+json": typeJSON,
	"application/vnd.pypi.simple.latest+html": typeHTML,
}

// negotiate chooses the form of a page from the Accept header (or PEP
// 691's format parameter): the offer with the highest q-value, its q
// that of the most specific range that matches it. No Accept at all is
// text/html, as PEP 691 asks; nothing acceptable is a 406.
func negotiate(r *http.Request) (string, error) {
	accept := strings.Join(r.Header.Values("Accept"), ",")
	if f := r.URL.Query().Get("format"); f != "" {
		accept = f
	}
	if strings.TrimSpace(accept) == "" {
		return typeText, nil
	}
	q := map[string]float64{}
	spec := map[string]int{}
	for _, part := range strings.Split(accept, ",") {
		mt, weight, ok := mediaRange(part)
		if !ok {
			continue
		}
		for _, o := range offers {
			if s := specificity(mt, o); s > spec[o] {
				spec[o], q[o] = s, weight
			}
		}
	}
	best := ""
	for _, o := range offers {
		if q[o] > 0 && (best == "" || q[o] > q[best]) {
			best = o
		}
	}
	if best == "" {
		return "", fetch.Errorf(http.StatusNotAcceptable, "not_acceptable", nil, "the index serves %s", strings.Join(offers, ", "))
	}
	return best, nil
}

// mediaRange reads one element of an Accept header.
func mediaRange(s string) (string, float64, bool) {
	mt, params, err := mime.ParseMediaType(strings.TrimSpace(s))
	if err != nil {
		return "", 0, false
	}
	if a, ok := aliases[mt]; ok {
		mt = a
	}
	q := 1.0
	if v, ok := params["q"]; ok {
		if q, err = strconv.ParseFloat(v, 64); err != nil || q < 0 || q > 1 {
			return "", 0, false
		}
	}
	return mt, q, true
}

// specificity says how closely media range mt matches offer: 3 exactly, 2
// by its type (text/*), 1 as */*, 0 not at all.
func specificity(mt, offer string) int {
	switch typ, _, _ := strings.Cut(offer, "/"); mt {
	case offer:
		return 3
	case typ + "/*":
		return 2
	case "*/*":
		return 1
	}
	return 0
}

type outMeta struct {
	APIVersion string `json:"api-version"`
}

// outPage is a project page as the mirror serves it (PEP 691, with PEP
// 700's versions, size and upload-time).
type outPage struct {
	Meta     outMeta   `json:"meta"`
	Name     string    `json:"name"`
	Files    []outFile `json:"files"`
	Versions []string  `json:"versions,omitempty"`
}

type outFile struct {
	Filename       string            `json:"filename"`
	URL            string            `json:"url"`
	Hashes         map[string]string `json:"hashes"`
	RequiresPython string            `json:"requires-python,omitempty"`
	Yanked         any               `json:"yanked,omitempty"` // true or the reason
	Size           int64             `json:"size,omitempty"`
	UploadTime     string            `json:"upload-time,omitempty"`
	// core-metadata only: pip before 23.1 fails on the JSON key
	// dist-info-metadata (PEP 714).
	CoreMetadata map[string]string `json:"core-metadata,omitempty"`

	// For the HTML form.
	SHA256, MetaSHA256, YankedReason string `json:"-"`
	IsYanked                         bool   `json:"-"`
}

// page is what the mirror serves of p's files: each at its path beneath
// the mirror's files/. It is version 1.1 of the API when every file's
// size is known, else 1.0 (without PEP 700's versions).
func (h *Handler) page(p *listing.Project, files []*listing.ProjectFile) outPage {
	pg := outPage{Meta: outMeta{APIVersion: "1.1"}, Name: p.Name, Files: make([]outFile, 0, len(files))}
	kept := map[string]bool{}
	for _, f := range files {
		o := outFile{Filename: f.Name, URL: h.prefix + "files/" + p.Name + "/" + url.PathEscape(f.Name),
			Hashes: map[string]string{"sha256": f.SHA256}, RequiresPython: f.RequiresPython, Size: f.Size,
			SHA256: f.SHA256, MetaSHA256: f.MetaSHA256, IsYanked: f.Yanked, YankedReason: f.YankedReason}
		if f.Yanked {
			o.Yanked = any(true)
			if f.YankedReason != "" {
				o.Yanked = f.YankedReason
			}
		}
		if !f.Uploaded.IsZero() {
			o.UploadTime = f.Uploaded.UTC().Format("2006-01-02T15:04:05.000000Z")
		}
		if f.MetaSHA256 != "" {
			o.CoreMetadata = map[string]string{"sha256": f.MetaSHA256}
		}
		if f.Size == 0 {
			pg.Meta.APIVersion = "1.0"
		}
		pg.Files = append(pg.Files, o)
		kept[f.Version] = true
	}
	if pg.Meta.APIVersion == "1.1" {
		pg.Versions = keptVersions(p, kept)
	}
	return pg
}

// keptVersions are the versions that kept a file: in the upstream's order,
// then any it did not list, in the order of the files.
func keptVersions(p *listing.Project, kept map[string]bool) []string {
	out := []string{}
	listed := map[string]bool{}
	for _, v := range p.Versions {
		if kept[v] && !listed[v] {
			out = append(out, v)
		}
		listed[v] = true
	}
	for _, f := range p.Files {
		if kept[f.Version] && !listed[f.Version] {
			out = append(out, f.Version)
			listed[f.Version] = true
		}
	}
	return out
}

// pageHTML is a project page as PEP 503 HTML, with PEP 592's data-yanked
// and PEP 658/714's core metadata attributes.
var pageHTML = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html>
  <head>
    <meta name="pypi:repository-version" content="{{.Meta.APIVersion}}">
    <title>Links for {{.Name}}</title>
  </head>
  <body>
    <h1>Links for {{.Name}}</h1>
{{range .Files}}    <a href="{{.URL}}#sha256={{.SHA256}}"
      {{- if .RequiresPython}} data-requires-python="{{.RequiresPython}}"{{end}}
      {{- with .MetaSHA256}} data-dist-info-metadata="sha256={{.}}" data-core-metadata="sha256={{.}}"{{end}}
      {{- if .IsYanked}} data-yanked="{{.YankedReason}}"{{end}}>{{.Filename}}</a><br />
{{end}}  </body>
</html>
`))

// outIndex is the index of projects.
type outIndex struct {
	Meta     outMeta      `json:"meta"`
	Projects []outProject `json:"projects"`
}

type outProject struct {
	Name string `json:"name"`
	Href string `json:"-"`
}

// rootHTML is the index of projects as PEP 503 HTML.
var rootHTML = template.Must(template.New("root").Parse(`<!DOCTYPE html>
<html>
  <head>
    <meta name="pypi:repository-version" content="{{.Meta.APIVersion}}">
    <title>Simple index</title>
  </head>
  <body>
{{range .Projects}}    <a href="{{.Href}}">{{.Name}}</a>
{{end}}  </body>
</html>
`))

// jsonRoot is the PEP 691 index of projects.
type jsonRoot struct {
	Meta struct {
		APIVersion string `json:"api-version"`
	} `json:"meta"`
	Projects []struct {
		Name string `json:"name"`
	} `json:"projects"`
}

// parseRoot reads the upstream's index of projects: the names that are
// valid project names.
func parseRoot(eco *resolver.Ecosystem, b []byte) ([]string, error) {
	var root jsonRoot
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("reading the index of projects: %w", err)
	}
	if err := listing.CheckAPIVersion(root.Meta.APIVersion); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(root.Projects))
	for _, p := range root.Projects {
		if eco.CheckName(p.Name) == nil && normalName.MatchString(eco.NormalizeName(p.Name)) {
			names = append(names, p.Name)
		}
	}
	return names, nil
}
