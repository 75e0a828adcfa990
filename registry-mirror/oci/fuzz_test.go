package oci

import (
	"encoding/hex"
	"strings"
	"testing"
)

// The fuzz targets of every parser of untrusted bytes: request paths,
// digests, manifests and indexes, tag lists, and the upstream's
// challenges and tokens. Their seed corpora are in testdata/fuzz.

func FuzzParsePath(f *testing.F) {
	f.Add("library/alpine/manifests/3.19")
	f.Add("a/blobs/sha256:" + hex64)
	f.Add("a/..%2fb/tags/list")
	f.Fuzz(func(t *testing.T, p string) {
		r, err := parsePath(p)
		if err != nil {
			return
		}
		if len(r.name) > maxName || strings.Contains(r.name, "..") || strings.HasPrefix(r.name, "/") || strings.Contains(r.name, "//") {
			t.Fatalf("parsePath(%q) accepted the name %q", p, r.name)
		}
		if strings.ContainsAny(r.ref, "/\\") || r.ref == ".." || r.kind == kindBlob && r.digest == nil {
			t.Fatalf("parsePath(%q) accepted the reference %q", p, r.ref)
		}
	})
}

func FuzzParseDigest(f *testing.F) {
	f.Add("sha256:" + hex64)
	f.Add("sha512:" + hex64 + hex64)
	f.Add("sha256:" + strings.ToUpper(hex64))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDigest(s)
		if err != nil {
			return
		}
		if got := d.Alg + ":" + hex.EncodeToString(d.Sum); got != s {
			t.Fatalf("parseDigest(%q) = %s: a digest with two spellings", s, got)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"config":{"size":1,"digest":"sha256:` + hex64 + `"},"layers":[]}`))
	f.Add([]byte(`{"schemaVersion":2,"manifests":[{"size":1,"digest":"sha256:` + hex64 + `"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest(b)
		if err != nil {
			return
		}
		if !known(m.mediaType) {
			t.Fatalf("parseManifest accepted the media type %q", m.mediaType)
		}
		for _, d := range append(m.blobs, m.children...) {
			if _, err := parseDigest(d.Digest.String()); err != nil || d.Size < 0 {
				t.Fatalf("parseManifest accepted the descriptor %+v", d)
			}
		}
	})
}

func FuzzParseTags(f *testing.F) {
	f.Add([]byte(`{"name":"a","tags":["1","latest"]}`))
	f.Add([]byte(`{"name":"a","tags":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tl, err := parseTags("a", b)
		if err != nil {
			return
		}
		for _, tag := range tl.Tags {
			if !tagRE.MatchString(tag) {
				t.Fatalf("parseTags kept the tag %q", tag)
			}
		}
	})
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"`)
	f.Add(`Bearer realm="a\"b",x=y`)
	f.Fuzz(func(t *testing.T, h string) {
		if p, ok := parseChallenge(h); ok && p["realm"] == "" {
			t.Fatalf("parseChallenge(%q) accepted a challenge without a realm", h)
		}
	})
}

func FuzzParseToken(f *testing.F) {
	f.Add([]byte(`{"token":"abc","access_token":"abc","expires_in":300}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if tok, err := parseToken(b); err == nil && (tok == "" || strings.ContainsAny(tok, " \r\n")) {
			t.Fatalf("parseToken(%q) = %q", b, tok)
		}
	})
}
