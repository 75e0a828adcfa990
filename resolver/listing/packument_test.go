package listing

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParsePackument: each version's dist fields, scripts, provenance and
// publish time; the dist-tags; a time that does not parse leaves that
// version's time unknown, says why, and fails nothing.
func TestParsePackument(t *testing.T) {
	doc := `{"name":"@s/x","dist-tags":{"latest":"1.1.0"},"versions":{
		"1.0.0":{"dist":{"tarball":"https://r/@s/x/-/x-1.0.0.tgz","integrity":"sha512-AA==","shasum":"ab",
			"signatures":[{"keyid":"k","sig":"s"}],"attestations":{"url":"u"}},
			"scripts":{"postinstall":"a","test":"b","preinstall":"c"},"gypfile":true},
		"1.1.0":{"dist":{"tarball":"t","attestations":null},"hasInstallScript":true},
		"2.0.0":{}},
		"time":{"created":"not a time","1.0.0":"2020-01-02T03:04:05.678Z","1.1.0":"yesterday","2.0.0":7}}`
	p, err := ParsePackument("@s/x", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.Tags["latest"] != "1.1.0" || len(p.Versions) != 3 || p.Top["dist-tags"] == nil {
		t.Fatalf("ParsePackument = %+v", p)
	}
	v := p.Versions["1.0.0"]
	want, _ := time.Parse(time.RFC3339Nano, "2020-01-02T03:04:05.678Z")
	if v.Tarball != "https://r/@s/x/-/x-1.0.0.tgz" || v.Integrity != "sha512-AA==" || v.Shasum != "ab" || !v.Attested ||
		!slices.Equal(v.Signatures, []Signature{{KeyID: "k", Sig: "s"}}) || !v.Published.Equal(want) ||
		!slices.Equal(v.Scripts, []string{"preinstall", "postinstall", "binding.gyp"}) || v.HasInstallScript {
		t.Errorf("1.0.0 = %+v", v)
	}
	if v := p.Versions["1.1.0"]; v.Attested || !v.HasInstallScript || len(v.Scripts) != 0 || !v.Published.IsZero() {
		t.Errorf("1.1.0 = %+v, want no attestations, hasInstallScript, no scripts, no publish time", v)
	}
	if p.TimeErr == nil || !strings.Contains(p.TimeErr.Error(), `time["1.1.0"]`) {
		t.Errorf("TimeErr = %v, want the first version whose time does not parse", p.TimeErr)
	}
	var m map[string]any
	if err := json.Unmarshal(p.Versions["2.0.0"].Raw, &m); err != nil || len(m) != 0 {
		t.Errorf("2.0.0 raw = %s, want the manifest as written", p.Versions["2.0.0"].Raw)
	}
}

// TestParsePackumentErrors: a document that cannot be read as a whole is
// an error; times are not.
func TestParsePackumentErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		err       bool
		timeErr   bool
	}{
		{name: "not json", doc: `<html>`, err: true},
		{name: "null", doc: `null`, err: true},
		{name: "no name", doc: `{"versions":{}}`, err: true},
		{name: "another package", doc: `{"name":"y","versions":{}}`, err: true},
		{name: "no versions", doc: `{"name":"x"}`, err: true},
		{name: "versions not an object", doc: `{"name":"x","versions":[]}`, err: true},
		{name: "dist-tags not strings", doc: `{"name":"x","versions":{},"dist-tags":{"latest":1}}`, err: true},
		{name: "manifest of another shape", doc: `{"name":"x","versions":{"1.0.0":{"gypfile":"yes"}}}`, err: true},
		{name: "hasInstallScript not a boolean", doc: `{"name":"x","versions":{"1.0.0":{"hasInstallScript":1}}}`, err: true},
		{name: "null versions", doc: `{"name":"x","versions":null}`},
		{name: "time not an object", doc: `{"name":"x","versions":{"1.0.0":{}},"time":7}`, timeErr: true},
		{name: "time null", doc: `{"name":"x","versions":{"1.0.0":{}},"time":null}`},
		{name: "time of a version null", doc: `{"name":"x","versions":{"1.0.0":{}},"time":{"1.0.0":null}}`, timeErr: true},
		{name: "time of no version", doc: `{"name":"x","versions":{"1.0.0":{}},"time":{"2.0.0":"bad"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePackument("x", []byte(tt.doc))
			if (err != nil) != tt.err {
				t.Fatalf("ParsePackument(%s) = %v, want an error %v", tt.doc, err, tt.err)
			}
			if err == nil && (p.TimeErr != nil) != tt.timeErr {
				t.Errorf("ParsePackument(%s): TimeErr = %v, want one %v", tt.doc, p.TimeErr, tt.timeErr)
			}
		})
	}
}

// TestBundledNames: the names a manifest bundles, from either spelling; a
// field of another shape than npm's, or a name that is no package's,
// bundles nothing and fails nothing.
func TestBundledNames(t *testing.T) {
	for _, tt := range []struct {
		manifest string
		want     []string
	}{
		{`{"bundleDependencies":["b","a","b"]}`, []string{"a", "b"}},
		{`{"bundledDependencies":["a"],"bundleDependencies":["c"]}`, []string{"a", "c"}},
		{`{"dependencies":{"a":"1","b":"2"},"bundleDependencies":true}`, []string{"a", "b"}},
		{`{"dependencies":{"a":"1"},"bundleDependencies":false}`, nil},
		{`{"dependencies":{"a":"1"},"bundleDependencies":{"a":"1"}}`, nil},
		{`{"dependencies":["a"],"bundleDependencies":true}`, nil},
		{`{"bundleDependencies":["../x","A",7,"","ok"]}`, []string{"ok"}},
		{`{}`, nil},
	} {
		var m manifestJSON
		if err := json.Unmarshal([]byte(tt.manifest), &m); err != nil {
			t.Fatalf("%s: %v", tt.manifest, err)
		}
		if got := m.bundled(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: bundled = %q, want %q", tt.manifest, got, tt.want)
		}
	}
}

func TestCheckNpmName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"left-pad", true}, {"@babel/core", true}, {"a.b~c_d", true},
		{"", false}, {"Upper", false}, {".hidden", false}, {"_x", false}, {"@scope", false},
		{"@s/../x", false}, {"a/b", false}, {strings.Repeat("a", 215), false},
	} {
		if err := CheckNpmName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckNpmName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// FuzzParsePackument: any document parses without panicking; what parses
// names the package, has a manifest for every version, bundles only valid
// names (sorted, each once), and knows a time only when it read one.
func FuzzParsePackument(f *testing.F) {
	f.Add([]byte(`{"name":"x","versions":{"1.0.0":{"dist":{"tarball":"http://h/x/-/x-1.0.0.tgz","integrity":"sha512-AA=="}}},"dist-tags":{"latest":"1.0.0"},"time":{"1.0.0":"2020-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"name":"x","versions":{"1":{}}}`))
	f.Add([]byte(`{"name":"x","versions":null,"time":7}`))
	f.Add([]byte(`{"name":"x","versions":{"1":{"dependencies":{"a":"1","@s/b":"2"},"bundledDependencies":true,"bundleDependencies":["c",7,"C"]}}}`))
	f.Add([]byte(`{"name":"x","versions":{"1":{"dependencies":[1],"bundleDependencies":{"a":1},"bundledDependencies":true}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePackument("x", b)
		if err != nil {
			return
		}
		if p.Name != "x" || p.Top == nil {
			t.Fatalf("ParsePackument = %+v, want the package x", p)
		}
		for v, m := range p.Versions {
			if m == nil || !json.Valid(m.Raw) {
				t.Fatalf("version %q has manifest %+v", v, m)
			}
			if !slices.IsSorted(m.Bundles) || len(slices.Compact(slices.Clone(m.Bundles))) != len(m.Bundles) {
				t.Errorf("version %q bundles %q: not sorted, each once", v, m.Bundles)
			}
			for _, n := range m.Bundles {
				if CheckNpmName(n) != nil {
					t.Errorf("version %q bundles %q, no npm package name", v, n)
				}
			}
		}
		var times map[string]json.RawMessage
		_ = json.Unmarshal(p.Top["time"], &times)
		for v, m := range p.Versions {
			var s string
			if m.Published.IsZero() {
				continue
			}
			if err := json.Unmarshal(times[v], &s); err != nil {
				t.Fatalf("version %q published %s, but its time is %s", v, m.Published, times[v])
			}
			if w, err := time.Parse(time.RFC3339Nano, s); err != nil || !w.Equal(m.Published) {
				t.Fatalf("version %q published %s, but its time is %q", v, m.Published, s)
			}
		}
	})
}
