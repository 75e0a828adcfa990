package oci

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

var hex64 = strings.Repeat("0123456789abcdef", 4)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		name, in       string
		kind, repo, rf string
		digest         bool
		err            error
	}{
		{name: "tag", in: "library/alpine/manifests/3.19", kind: kindManifest, repo: "library/alpine", rf: "3.19"},
		{name: "digest", in: "library/alpine/manifests/sha256:" + hex64, kind: kindManifest, repo: "library/alpine", rf: "sha256:" + hex64, digest: true},
		{name: "escaped colon", in: "a/manifests/sha256%3A" + hex64, kind: kindManifest, repo: "a", rf: "sha256:" + hex64, digest: true},
		{name: "blob", in: "a/b/c/blobs/sha256:" + hex64, kind: kindBlob, repo: "a/b/c", rf: "sha256:" + hex64, digest: true},
		{name: "sha512 blob", in: "a/blobs/sha512:" + hex64 + hex64, kind: kindBlob, repo: "a", rf: "sha512:" + hex64 + hex64, digest: true},
		{name: "tags", in: "my-org/tool_x/tags/list", kind: kindTags, repo: "my-org/tool_x"},
		{name: "a repository named manifests", in: "x/manifests/manifests/latest", kind: kindManifest, repo: "x/manifests", rf: "latest"},
		{name: "separators", in: "a.b__c--d/manifests/latest", kind: kindManifest, repo: "a.b__c--d", rf: "latest"},
		{name: "traversal", in: "../etc/manifests/latest", err: ErrBadName},
		{name: "escaped traversal", in: "a/..%2f..%2fetc/manifests/latest", err: ErrBadName},
		{name: "upper case", in: "Library/manifests/latest", err: ErrBadName},
		{name: "empty segment", in: "a//b/manifests/latest", err: ErrBadName},
		{name: "trailing separator", in: "a-/manifests/latest", err: ErrBadName},
		{name: "triple underscore", in: "a___b/manifests/latest", err: ErrBadName},
		{name: "too long", in: strings.Repeat("a/", 128) + "a/manifests/latest", err: ErrBadName},
		{name: "tag traversal", in: "a/manifests/..", err: ErrBadReference},
		{name: "tag too long", in: "a/manifests/" + strings.Repeat("x", 129), err: ErrBadReference},
		{name: "tag with a slash", in: "a/manifests/x%2fy", err: ErrBadReference},
		{name: "upper-case digest", in: "a/manifests/sha256:" + strings.ToUpper(hex64), err: ErrBadDigest},
		{name: "short digest", in: "a/blobs/sha256:abc", err: ErrBadDigest},
		{name: "unknown algorithm", in: "a/blobs/md5:" + hex64[:32], err: ErrBadDigest},
		{name: "blob by tag", in: "a/blobs/latest", err: ErrBadDigest},
		{name: "bad escape", in: "a/manifests/%zz"},
		{name: "nothing", in: "a/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parsePath(tc.in)
			if tc.kind == "" {
				if err == nil || tc.err != nil && !errors.Is(err, tc.err) {
					t.Errorf("parsePath(%q) = %+v, %v, want %v", tc.in, r, err, tc.err)
				}
				return
			}
			if err != nil || r.kind != tc.kind || r.name != tc.repo || r.ref != tc.rf || (r.digest != nil) != tc.digest {
				t.Errorf("parsePath(%q) = %+v, %v, want %s %s %s", tc.in, r, err, tc.kind, tc.repo, tc.rf)
			}
		})
	}
}

func TestParseManifest(t *testing.T) {
	desc := `{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":3,"digest":"sha256:` + hex64 + `"}`
	for _, tc := range []struct {
		name, in string
		want     types.MediaType
		blobs    int
	}{
		{name: "oci manifest", in: `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` + desc + `,"layers":[` + desc + `]}`,
			want: types.OCIManifestSchema1, blobs: 2},
		{name: "docker manifest", in: `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":` + desc + `,"layers":[]}`,
			want: types.DockerManifestSchema2, blobs: 1},
		{name: "oci manifest without mediaType", in: `{"schemaVersion":2,"config":` + desc + `}`, want: types.OCIManifestSchema1, blobs: 1},
		{name: "index without mediaType", in: `{"schemaVersion":2,"manifests":[` + desc + `]}`, want: types.OCIImageIndex},
		{name: "docker list", in: `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[]}`,
			want: types.DockerManifestList},
		{name: "schema 1", in: `{"schemaVersion":1,"name":"x","fsLayers":[]}`},
		{name: "unknown media type", in: `{"schemaVersion":2,"mediaType":"text/html","config":` + desc + `}`},
		{name: "index with layers", in: `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[],"layers":[]}`},
		{name: "manifest without config", in: `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}`},
		{name: "bad digest", in: `{"schemaVersion":2,"config":{"size":1,"digest":"sha256:abc"}}`},
		{name: "unsupported digest", in: `{"schemaVersion":2,"config":{"size":1,"digest":"md5:` + hex64[:32] + `"}}`},
		{name: "negative size", in: `{"schemaVersion":2,"config":{"size":-1,"digest":"sha256:` + hex64 + `"}}`},
		{name: "not json", in: `<html>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseManifest([]byte(tc.in))
			if tc.want == "" {
				if !errors.Is(err, ErrBadManifest) {
					t.Errorf("parseManifest(%s) = %+v, %v, want ErrBadManifest", tc.in, m, err)
				}
				return
			}
			if err != nil || m.mediaType != tc.want || len(m.blobs) != tc.blobs {
				t.Errorf("parseManifest(%s) = %+v, %v, want %s with %d blobs", tc.in, m, err, tc.want, tc.blobs)
			}
		})
	}
}

func TestAccept(t *testing.T) {
	all := accept(nil)
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{name: "none", want: all},
		{name: "wildcard", in: []string{"*/*"}, want: all},
		{name: "one", in: []string{"application/vnd.docker.distribution.manifest.v2+json"}, want: "application/vnd.docker.distribution.manifest.v2+json"},
		{name: "several headers and parameters", in: []string{"application/vnd.oci.image.index.v1+json; q=0.9, text/html",
			"application/vnd.oci.image.manifest.v1+json,application/vnd.oci.image.index.v1+json"},
			want: "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := accept(tc.in); got != tc.want {
				t.Errorf("accept(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseChallenge(t *testing.T) {
	for _, tc := range []struct {
		name, in            string
		realm, scope, extra string
		ok                  bool
	}{
		{name: "docker hub", in: `Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"`,
			realm: "https://auth.docker.io/token", scope: "repository:library/alpine:pull", ok: true},
		{name: "comma in a quoted value", in: `bearer realm="https://a/t", scope="repository:x:pull,push"`, realm: "https://a/t", scope: "repository:x:pull,push", ok: true},
		{name: "escapes and bare tokens", in: `Bearer realm="https://a/\"t\"",service=svc`, realm: `https://a/"t"`, ok: true},
		{name: "basic", in: `Basic realm="x"`},
		{name: "no realm", in: `Bearer service="x"`},
		{name: "unterminated", in: `Bearer realm="https://a`},
		{name: "no equals", in: `Bearer realm`},
		{name: "empty", in: ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := parseChallenge(tc.in)
			if ok != tc.ok || ok && (p["realm"] != tc.realm || p["scope"] != tc.scope) {
				t.Errorf("parseChallenge(%q) = %v, %v, want realm %q scope %q ok %v", tc.in, p, ok, tc.realm, tc.scope, tc.ok)
			}
		})
	}
}

func TestParseTags(t *testing.T) {
	tl, err := parseTags("a/b", []byte(`{"name":"a/b","tags":["1.0","../x","latest",""]}`))
	if err != nil || strings.Join(tl.Tags, ",") != "1.0,latest" {
		t.Errorf("parseTags = %+v, %v, want the valid tags 1.0 and latest", tl, err)
	}
	if _, err := parseTags("a/b", []byte(`{"name":"c","tags":[]}`)); !errors.Is(err, ErrBadTags) {
		t.Errorf("parseTags(another repository) = %v, want ErrBadTags", err)
	}
}

func TestParseToken(t *testing.T) {
	for in, want := range map[string]string{`{"token":"t1"}`: "t1", `{"access_token":"t2"}`: "t2", `{"token":""}`: "", `{"token":"a b"}`: "", `[`: ""} {
		got, err := parseToken([]byte(in))
		if got != want || (want == "") != errors.Is(err, ErrBadChallenge) {
			t.Errorf("parseToken(%s) = %q, %v, want %q", in, got, err, want)
		}
	}
}
