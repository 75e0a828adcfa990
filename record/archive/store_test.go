package archive

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandtrail/sandtrail/record/event"
)

// startRegistry serves go-containerregistry's registry (pkg/registry,
// in memory) on loopback for the test, and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestStoreRoundTrip pushes bundles of two sessions to a directory store
// and to a real registry, lists them, pulls them by session and by digest,
// and verifies what came back, alone and against the live journal.
func TestStoreRoundTrip(t *testing.T) {
	f := newFixture(t, 3, 12)
	host := startRegistry(t)
	stores := []struct {
		name   string
		target string
	}{
		{"dir", t.TempDir()},
		{"oci ref", "oci://" + host + "/sandtrail/archive"},
		{"plain ref", host + "/sandtrail/plain"},
	}
	ctx := context.Background()
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			s, err := OpenStore(st.target, WithKeychain(authn.DefaultKeychain))
			if err != nil {
				t.Fatalf("OpenStore(%s) = %v", st.target, err)
			}
			if got, err := s.List(ctx); err != nil || len(got) != 0 {
				t.Fatalf("List(empty store) = %v, %v, want none", got, err)
			}
			if _, err := s.Get(ctx, f.sessions[0]); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(not pushed) = %v, want ErrNotFound", err)
			}
			var pushed []Stored
			for _, sess := range f.sessions[:2] {
				put, err := s.Put(ctx, f.seal(t, sess))
				if err != nil {
					t.Fatalf("Put(%s) = %v", sess, err)
				}
				pushed = append(pushed, put)
			}
			list, err := s.List(ctx)
			if err != nil || len(list) != 2 {
				t.Fatalf("List() = %+v, %v, want 2 bundles", list, err)
			}
			for i, got := range list {
				want := pushed[i]
				if got.SessionID != want.SessionID || got.Digest != want.Digest || got.Size != want.Size ||
					got.CheckpointSize != want.CheckpointSize || !got.Created.Equal(sealedAt) || got.Location != want.Location {
					t.Errorf("List()[%d] = %+v, want %+v", i, got, want)
				}
			}
			for _, key := range []string{pushed[1].SessionID, digestKey(t, st.name, pushed[1])} {
				b, err := s.Get(ctx, key)
				if err != nil {
					t.Fatalf("Get(%s) = %v", key, err)
				}
				if b.Digest() != pushed[1].Digest || b.Session() != pushed[1].SessionID {
					t.Errorf("Get(%s) = bundle %s of %s, want %s of %s", key, b.Digest(), b.Session(), pushed[1].Digest, pushed[1].SessionID)
				}
				if _, err := b.VerifyLive(f.dir, f.verifiers); err != nil {
					t.Errorf("VerifyLive(pulled %s) = %v", key, err)
				}
			}
			// Pushing again replaces the session's bundle.
			if _, err := s.Put(ctx, f.seal(t, f.sessions[1])); err != nil {
				t.Fatalf("Put(again) = %v", err)
			}
			if list, _ := s.List(ctx); len(list) != 2 {
				t.Errorf("List(after a second push) = %d bundles, want 2", len(list))
			}
		})
	}
}

// digestKey is the digest a store's Get takes for a stored bundle: the
// bundle's own in a directory, the OCI manifest's in a registry.
func digestKey(t *testing.T, store string, s Stored) string {
	t.Helper()
	if store == "dir" {
		return s.Digest
	}
	_, d, ok := strings.Cut(s.Location, "@")
	if !ok {
		t.Fatalf("registry location %q has no digest", s.Location)
	}
	return d
}

// TestDirStoreRefusesSwaps: a directory whose file holds another session's
// bundle, or bytes that are not a bundle, does not return it as the
// session's.
func TestDirStoreRefusesSwaps(t *testing.T) {
	f := newFixture(t, 2, 6)
	ctx := context.Background()
	d, err := NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := f.seal(t, f.sessions[0])
	if err := os.WriteFile(filepath.Join(d.Path(), FileName(f.sessions[1])), a.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, f.sessions[1]); !errors.Is(err, ErrTampered) {
		t.Errorf("Get(a file holding another session's bundle) = %v, want ErrTampered", err)
	}
	if err := os.WriteFile(filepath.Join(d.Path(), FileName(f.sessions[1])), []byte("not a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, f.sessions[1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("Get(garbage) = %v, want ErrMalformed", err)
	}
	if _, err := d.List(ctx); !errors.Is(err, ErrMalformed) {
		t.Errorf("List(with garbage) = %v, want ErrMalformed naming the file", err)
	}
	if _, err := d.Get(ctx, "../x"); !errors.Is(err, ErrBadSession) {
		t.Errorf("Get(../x) = %v, want ErrBadSession", err)
	}
	missing, _ := NewDir(filepath.Join(d.Path(), "missing"))
	if _, err := missing.List(ctx); err == nil {
		t.Errorf("List(a directory that does not exist) = nil error, want one")
	}
	if _, err := os.Stat(missing.Path()); err == nil {
		t.Errorf("List created %s", missing.Path())
	}
}

// TestRegistryRefusesOtherArtifacts: a tag that is not a session bundle
// is not pulled as one, and is left out of the list.
func TestRegistryRefusesOtherArtifacts(t *testing.T) {
	f := newFixture(t, 1, 6)
	host := startRegistry(t)
	ctx := context.Background()
	r, err := NewRegistry(host + "/sandtrail/archive")
	if err != nil {
		t.Fatal(err)
	}
	b := f.seal(t, f.sessions[0])
	if _, err := r.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Another artifact under a session-like tag: the same bundle's blobs,
	// with another artifactType.
	mf := strings.NewReplacer(ArtifactType, "application/vnd.example.other").Replace(string(mustManifest(t, b)))
	if err := putManifest(ctx, r, "sess-other", []byte(mf)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "sess-other"); !errors.Is(err, ErrMalformed) {
		t.Errorf("Get(another artifact) = %v, want ErrMalformed", err)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].SessionID != f.sessions[0] {
		t.Errorf("List() = %+v, %v, want only %s", list, err, f.sessions[0])
	}
}

// TestPlainHTTPGuard: plain http goes to loopback only, unless allowed.
func TestPlainHTTPGuard(t *testing.T) {
	called := 0
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		called++
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})
	tests := []struct {
		url      string
		insecure bool
		want     bool
	}{
		{"http://127.0.0.1:5000/v2/", false, true},
		{"http://[::1]:5000/v2/", false, true},
		{"http://localhost:5000/v2/", false, true},
		{"http://192.0.2.7:5000/v2/", false, false},
		{"http://registry.example:5000/v2/", false, false},
		{"http://192.0.2.7:5000/v2/", true, true},
		{"https://registry.example/v2/", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			called = 0
			g := &plainHTTPGuard{next: next, insecure: tt.insecure}
			req, _ := http.NewRequest(http.MethodGet, tt.url, nil)
			_, err := g.RoundTrip(req)
			if (err == nil) != tt.want || (called == 1) != tt.want {
				t.Errorf("RoundTrip(%s, insecure %v) = %v (sent: %v), want sent %v", tt.url, tt.insecure, err, called == 1, tt.want)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestOpenStore: which targets name which store.
func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		target string
		want   string // "dir", "registry" or "error"
	}{
		{"oci://127.0.0.1:5000/sandtrail/archive", "registry"},
		{"127.0.0.1:5000/sandtrail/archive", "registry"},
		{"registry.example/sandtrail/archive", "registry"},
		{"localhost/sandtrail/archive", "registry"},
		{"dir:" + filepath.Join(dir, "a"), "dir"},
		{filepath.Join(dir, "b"), "dir"},
		{"sandtrail/archive", "error"},
		{"oci://sandtrail/archive", "error"},
		{"oci://127.0.0.1:5000/sandtrail/archive:tag", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			s, err := OpenStore(tt.target)
			got := "error"
			switch s.(type) {
			case *Dir:
				got = "dir"
			case *Registry:
				got = "registry"
			}
			if got != tt.want {
				t.Errorf("OpenStore(%s) = %T, %v, want a %s", tt.target, s, err, tt.want)
			}
		})
	}
}

// mustManifest returns the OCI manifest Put writes for b.
func mustManifest(t *testing.T, b *Bundle) []byte {
	t.Helper()
	raw, err := json.Marshal(artifactManifest(b, static.NewLayer(emptyConfig, types.OCIEmptyJSON), static.NewLayer(b.Bytes(), LayerMediaType)))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// putManifest puts a raw OCI manifest under tag.
func putManifest(ctx context.Context, r *Registry, tag string, raw []byte) error {
	return remote.Put(r.repo.Tag(tag), rawManifest(raw), r.options(ctx)...)
}

// TestArchiver archives sessions into a directory and a registry, each
// read back and verified live; a store that gives back another bundle is
// caught before the caller could prune.
func TestArchiver(t *testing.T) {
	f := newFixture(t, 2, 8)
	ctx := context.Background()
	for _, target := range []string{t.TempDir(), "oci://" + startRegistry(t) + "/sandtrail/archive"} {
		s, err := OpenStore(target)
		if err != nil {
			t.Fatal(err)
		}
		a := NewArchiver(f.dir, f.ix, f.verifiers, s)
		for _, sess := range f.sessions {
			st, err := a.Archive(ctx, sess)
			if err != nil || st.SessionID != sess {
				t.Errorf("Archive(%s) into %s = %+v, %v", sess, target, st, err)
			}
		}
	}
	// Again: the store's bundle stands.
	d, _ := NewDir(t.TempDir())
	a := NewArchiver(f.dir, f.ix, f.verifiers, d)
	if st, err := a.Archive(ctx, f.sessions[0]); err != nil || st.Kept {
		t.Fatalf("Archive(first) = %+v, %v, want stored", st, err)
	}
	if st, err := a.Archive(ctx, f.sessions[0]); err != nil || !st.Kept {
		t.Errorf("Archive(again) = %+v, %v, want the stored bundle kept", st, err)
	}
	// What retention checks before it prunes: the bundle holds the seqs.
	seqs, err := f.ix.SessionSeqs(ctx, f.sessions[0])
	if err != nil || len(seqs) == 0 {
		t.Fatalf("SessionSeqs = %v, %v", seqs, err)
	}
	if err := a.HoldsEntries(ctx, f.sessions[0], seqs); err != nil {
		t.Errorf("HoldsEntries(the session's seqs) = %v", err)
	}
	if err := a.HoldsEntries(ctx, f.sessions[0], append(slices.Clone(seqs), 1<<40)); err == nil || !strings.Contains(err.Error(), "lacks entry") {
		t.Errorf("HoldsEntries(a seq the bundle lacks) = %v, want it named", err)
	}
	// The session's entries pruned from the journal (only the hash file and
	// the checkpoints left), then Archive called again, as after a prune
	// that a crash interrupted: the stored bundle, verified live, stands.
	pruned := copyDir(t, f.dir, func(name string) bool { return strings.HasPrefix(name, "seg-") })
	if st, err := NewArchiver(pruned, nil, f.verifiers, d).Archive(ctx, f.sessions[0]); err != nil || !st.Kept {
		t.Errorf("Archive(after the entries were pruned) = %+v, %v, want the stored bundle kept", st, err)
	}
	// A later entry of the session (an alert after it ended): the bundle is
	// replaced by one that holds it too.
	f.appendEvents(t, nil, &event.Event{Kind: "tool.invoke", Source: event.SourceAPI, SessionID: f.sessions[0], Tool: &event.Tool{Name: "sh"}})
	st, err := NewArchiver(f.dir, nil, f.verifiers, d).Archive(ctx, f.sessions[0])
	if err != nil || st.Kept {
		t.Fatalf("Archive(after the session grew) = %+v, %v, want a new bundle", st, err)
	}
	if b, err := d.Get(ctx, f.sessions[0]); err != nil || b.Manifest.Entries != 9 {
		t.Errorf("the stored bundle after the session grew holds %v entries (%v), want 9", b.Manifest.Entries, err)
	}
	swap := &swappingStore{Store: d, other: f.seal(t, f.sessions[1])}
	if _, err := NewArchiver(f.dir, f.ix, f.verifiers, swap).Archive(ctx, f.sessions[0]); !errors.Is(err, ErrTampered) {
		t.Errorf("Archive(into a store that swaps bundles) = %v, want ErrTampered", err)
	}
}

// swappingStore is a store that gives back another bundle than it was
// given, as a hostile or broken one could.
type swappingStore struct {
	Store
	other *Bundle
}

func (s *swappingStore) Get(context.Context, string) (*Bundle, error) { return s.other, nil }
