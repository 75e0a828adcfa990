package pypi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/resolver"
	"github.com/sandtrail/sandtrail/resolver/listing"
)

func pypiEco(t testing.TB) *resolver.Ecosystem {
	e, err := resolver.Lookup(resolver.PyPI)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var pageURL, _ = url.Parse("https://pypi.example/simple/demo-pkg/")

// TestParseRoot: the names of the index of projects, bad ones left out.
func TestParseRoot(t *testing.T) {
	names, err := parseRoot(pypiEco(t), []byte(`{"meta":{"api-version":"1.0"},"projects":[{"name":"Django"},{"name":"-bad"},{"name":"a b"},{"name":"x_y"}]}`))
	if err != nil || strings.Join(names, " ") != "Django x_y" {
		t.Errorf("parseRoot = %v, %v, want Django x_y", names, err)
	}
	if _, err := parseRoot(pypiEco(t), []byte(`{"projects":[]}`)); !errors.Is(err, listing.ErrAPIVersion) {
		t.Errorf("parseRoot without api-version = %v, want %v", err, listing.ErrAPIVersion)
	}
}

// FuzzProjectPage: a page that parses (listing's FuzzParseProject fuzzes
// the format) renders as the mirror serves it, JSON and HTML.
func FuzzProjectPage(f *testing.F) {
	eco := pypiEco(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := listing.ParseProject("demo-pkg", pageURL, b)
		if err != nil {
			return
		}
		h := &Handler{eco: eco, prefix: "/pypi/"}
		pg := h.page(p, p.Files)
		if err := pageHTML.Execute(io.Discard, pg); err != nil {
			t.Fatalf("rendering a parsed page: %v", err)
		}
		if _, err := json.Marshal(pg); err != nil {
			t.Fatalf("encoding a parsed page: %v", err)
		}
		for i, o := range pg.Files {
			if want := "/pypi/files/demo-pkg/" + url.PathEscape(p.Files[i].Name); o.URL != want {
				t.Fatalf("file %q served at %q, want %q", p.Files[i].Name, o.URL, want)
			}
		}
	})
}

func FuzzParseRoot(f *testing.F) {
	eco := pypiEco(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := parseRoot(eco, b)
		if err != nil {
			return
		}
		if err := rootHTML.Execute(io.Discard, outIndex{Projects: []outProject{{Name: strings.Join(names, ",")}}}); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzNegotiate(f *testing.F) {
	f.Fuzz(func(t *testing.T, accept string) {
		r := httptest.NewRequest("GET", "/pypi/simple/", nil)
		r.Header.Set("Accept", accept)
		ct, err := negotiate(r)
		if err == nil && ct != typeJSON && ct != typeHTML && ct != typeText {
			t.Fatalf("negotiate(%q) = %q", accept, ct)
		}
	})
}
