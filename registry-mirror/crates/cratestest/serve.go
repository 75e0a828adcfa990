package cratestest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// CrateFile builds the .crate of a version: a gzipped tar of
// <name>-<version>/Cargo.toml, <name>-<version>/src/lib.rs and the
// version's Files, the same bytes every time.
func CrateFile(name string, v Version) []byte {
	var toml strings.Builder
	fmt.Fprintf(&toml, "[package]\nname = %q\nversion = %q\nedition = \"2021\"\nlicense = \"MIT\"\ndescription = \"a fixture\"\n", name, v.Version)
	if _, ok := v.Files["build.rs"]; ok {
		toml.WriteString("build = \"build.rs\"\n")
	}
	if len(v.Deps) > 0 {
		toml.WriteString("\n[dependencies]\n")
		for _, d := range v.Deps {
			fmt.Fprintf(&toml, "%s = %q\n", d.Name, d.Req)
		}
	}
	dir := name + "-" + v.Version + "/"
	files := []struct{ path, body string }{
		{dir + "Cargo.toml", toml.String()},
		{dir + "src/lib.rs", fmt.Sprintf("//! %s %s, a fixture crate.\n\npub fn version() -> &'static str {\n    %q\n}\n", name, v.Version, v.Version)},
	}
	for _, p := range slices.Sorted(maps.Keys(v.Files)) {
		files = append(files, struct{ path, body string }{dir + p, v.Files[p]})
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Name: f.path, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(499162500, 0),
			Typeflag: tar.TypeReg, Format: tar.FormatUSTAR})
		tw.Write([]byte(f.body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// indexDep is a dependency as an index line writes it.
type indexDep struct {
	Name            string   `json:"name"`
	Req             string   `json:"req"`
	Features        []string `json:"features"`
	Optional        bool     `json:"optional"`
	DefaultFeatures bool     `json:"default_features"`
	Target          *string  `json:"target"`
	Kind            string   `json:"kind"`
}

// indexLine is one version's line, in the field order crates.io writes.
type indexLine struct {
	Name     string              `json:"name"`
	Vers     string              `json:"vers"`
	Deps     []indexDep          `json:"deps"`
	Cksum    string              `json:"cksum"`
	Features map[string][]string `json:"features"`
	Yanked   bool                `json:"yanked"`
	Links    *string             `json:"links"`
	V        int                 `json:"v"`
	Pubtime  string              `json:"pubtime,omitempty"`
}

// Line is the index line of version v of crate name, whose .crate is b.
func Line(name string, v Version, b []byte) string {
	l := indexLine{Name: name, Vers: v.Version, Deps: []indexDep{}, Cksum: Cksum(b), Features: map[string][]string{}, Yanked: v.Yanked, V: 1}
	for _, d := range v.Deps {
		l.Deps = append(l.Deps, indexDep{Name: d.Name, Req: d.Req, Features: []string{}, DefaultFeatures: true, Kind: "normal"})
	}
	if !v.NoPubtime {
		pub := v.Published
		if pub.IsZero() {
			pub = time.Now().Add(-30 * 24 * time.Hour)
		}
		l.Pubtime = pub.UTC().Format(time.RFC3339)
	}
	j, _ := json.Marshal(l)
	return string(j)
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	p, _ := url.PathUnescape(req.URL.EscapedPath())
	r.mu.Lock()
	r.counts[p]++
	down, dl := r.down, r.dl
	r.mu.Unlock()
	switch {
	case down:
		http.Error(w, "down", http.StatusServiceUnavailable)
	case p == "/config.json":
		if strings.HasPrefix(dl, "/") {
			dl = r.URL + dl
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"dl": dl, "api": r.URL})
	default:
		if b, ok := r.crateAt(p, dl); ok {
			w.Header().Set("Content-Type", "application/gzip")
			w.Write(b)
			return
		}
		r.serveIndex(w, p)
	}
}

// crateAt finds the .crate whose download path under template dl is p.
func (r *Registry) crateAt(p, dl string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !strings.ContainsAny(dl, "{") {
		dl += "/{crate}/{version}/download"
	}
	dl = strings.TrimPrefix(dl, r.URL)
	for _, c := range r.crates {
		pre := strings.TrimSuffix(strings.TrimPrefix(IndexPath(c.Name), "/"), "/"+strings.ToLower(c.Name))
		for _, v := range c.Versions {
			want := strings.NewReplacer("{crate}", c.Name, "{version}", v.Version, "{prefix}", pre, "{lowerprefix}", pre).Replace(dl)
			if want != p {
				continue
			}
			b := r.files[c.Name+"@"+v.Version]
			if r.tamper[c.Name+"@"+v.Version] {
				b = append(bytes.Clone(b), 0)
			}
			return b, true
		}
	}
	return nil, false
}

// serveIndex serves the index file at p.
func (r *Registry) serveIndex(w http.ResponseWriter, p string) {
	name := p[strings.LastIndexByte(p, '/')+1:]
	r.mu.Lock()
	c, ok := r.crates[name]
	var lines []string
	if ok && IndexPath(name) == p {
		for _, v := range c.Versions {
			lines = append(lines, Line(c.Name, v, r.files[c.Name+"@"+v.Version]))
		}
		lines = append(lines, r.extra[name]...)
	}
	r.mu.Unlock()
	if lines == nil {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, strings.Join(lines, "\n")+"\n")
}
