package mirror

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/registry-mirror/oci/ocitest"
)

// TestOCI: go-containerregistry's client pulls an image through the
// mirror's /v2/ from a loopback registry; each manifest and blob is a
// pkg.fetch event with the image's name and digest.
func TestOCI(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 2048, 2)
	reg.Push(t, "library/alpine:3.19", img)
	p, err := policies.Parse("t.yaml", []byte("sources:\n  registries:\n    oci: ["+reg.URL+"/v2/]\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"oci": reg.URL}, Policy: eng, Emit: rec.emit,
		Host: "h1", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/library/alpine:3.19")
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := pulled.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); len(rec.all()) < 3 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
	}
	d, _ := img.Digest()
	evs := rec.all()
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3 (the manifest and two layers)", len(evs))
	}
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("the pkg.fetch does not validate: %v", err)
		}
		if e.Kind != event.KindPkgFetch || e.Pkg.Ecosystem != "oci" || e.Pkg.Name != "library/alpine" || e.Pkg.Outcome != "served" ||
			!*e.Pkg.Verified || !strings.HasPrefix(e.Pkg.Hash, "sha256:") {
			t.Errorf("pkg.fetch = %+v", *e.Pkg)
		}
	}
	if p := evs[0].Pkg; p.Hash != d.String() || p.Resolved != "3.19" || p.Purl != "pkg:oci/library/alpine@3.19" {
		t.Errorf("the manifest's pkg.fetch = %+v, want digest %s, version 3.19", *p, d)
	}
}

// TestOCIVerdicts: with a cooldown, an OCI blob's publish time is unknown,
// so a verified blob is served flagged (cooldown.on_unknown_age) and its
// summary says verified; a blob that does not match its digest is a block
// by the mirror's digest check, not the cooldown's flag, and its summary
// says so.
func TestOCIVerdicts(t *testing.T) {
	reg := ocitest.Start(t)
	img := ocitest.Image(t, 2048, 2)
	reg.Push(t, "library/alpine:3.19", img)
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	bad := mf.Layers[1].Digest
	reg.Tamper(ocitest.BlobPath("library/alpine", bad), func(b []byte) []byte { b = bytes.Clone(b); b[0] ^= 1; return b })
	p, err := policies.Parse("t.yaml", []byte("sources:\n  registries:\n    oci: ["+reg.URL+"/v2/]\ncooldown:\n  min_age: 48h\n  on_unknown_age: flag\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policies.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m, err := New(Config{CacheDir: t.TempDir(), Upstreams: map[string]string{"oci": reg.URL}, Policy: eng, Emit: rec.emit, Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	for _, l := range mf.Layers {
		resp, err := http.Get(srv.URL + ocitest.BlobPath("library/alpine", l.Digest))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	evs := rec.wait(t, 2)
	for _, e := range evs {
		p, sum := e.Pkg, render.Summary(e)
		if p.Hash == bad.String() {
			if p.Outcome != fetch.HashMismatch || p.Verdict != "block" || p.Rule != fetch.RuleDigest || !strings.Contains(p.Reason, "mismatch") ||
				!strings.Contains(sum, "UNVERIFIED [block]") {
				t.Errorf("tampered blob: %+v, summary %q, want a block by %s", *p, sum, fetch.RuleDigest)
			}
			continue
		}
		if p.Outcome != fetch.Served || p.Verdict != "flag" || p.Rule != "cooldown.on_unknown_age" || !strings.Contains(sum, "verified [flag]") {
			t.Errorf("verified blob: %+v, summary %q, want served, verified, flagged", *p, sum)
		}
	}
}
