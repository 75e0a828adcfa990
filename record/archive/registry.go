package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sandtrail/sandtrail/record/event"
)

// The annotations of a pushed bundle's manifest. They repeat what the
// bundle's manifest says, for listing; nothing trusts them.
const (
	AnnotationCreated        = "org.opencontainers.image.created"
	AnnotationTitle          = "org.opencontainers.image.title"
	AnnotationSession        = "dev.sandtrail.session-id"
	AnnotationCheckpointSize = "dev.sandtrail.checkpoint-size"
	AnnotationEntries        = "dev.sandtrail.entries"
)

// maxManifestBytes bounds a pushed bundle's OCI manifest.
const maxManifestBytes = 64 << 10

// emptyConfig is the OCI empty descriptor's content, the config of an
// artifact that needs none.
var emptyConfig = []byte("{}")

// Registry is an OCI registry store: each bundle is an artifact (its
// manifest's artifactType ArtifactType, an empty config, one layer of
// LayerMediaType that is the bundle file) tagged with its session id in one
// repository. It authenticates with authn.DefaultKeychain (docker's
// config.json and credential helpers), and talks plain http only to a
// registry on loopback, or anywhere with AllowPlainHTTP.
type Registry struct {
	repo name.Repository
	opts []remote.Option
}

var _ Store = (*Registry)(nil)

type storeOptions struct {
	insecure  bool
	keychain  authn.Keychain
	transport http.RoundTripper
}

// WithKeychain sets the registry store's credentials (default
// authn.DefaultKeychain).
func WithKeychain(k authn.Keychain) StoreOption { return func(o *storeOptions) { o.keychain = k } }

// NewRegistry returns the registry store of the repository ref
// ("host[:port]/path", no tag or digest; the host is required).
func NewRegistry(ref string, opts ...StoreOption) (*Registry, error) {
	o := storeOptions{keychain: authn.DefaultKeychain, transport: remote.DefaultTransport}
	for _, opt := range opts {
		opt(&o)
	}
	repo, err := name.NewRepository(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("archive: registry repository %q: %w", event.Clip(ref, 120), err)
	}
	if o.insecure || isLoopback(repo.RegistryStr()) {
		if repo, err = name.NewRepository(ref, name.StrictValidation, name.Insecure); err != nil {
			return nil, fmt.Errorf("archive: registry repository %q: %w", event.Clip(ref, 120), err)
		}
	}
	guard := &plainHTTPGuard{next: o.transport, insecure: o.insecure}
	return &Registry{repo: repo, opts: []remote.Option{remote.WithAuthFromKeychain(o.keychain), remote.WithTransport(guard)}}, nil
}

// Repository returns the store's repository.
func (r *Registry) Repository() string { return r.repo.String() }

func (r *Registry) options(ctx context.Context) []remote.Option {
	return append([]remote.Option{remote.WithContext(ctx)}, r.opts...)
}

// Put pushes the bundle's blobs and its manifest, tagged with its session.
func (r *Registry) Put(ctx context.Context, b *Bundle) (Stored, error) {
	if err := CheckSession(b.Session()); err != nil {
		return Stored{}, err
	}
	cfg := static.NewLayer(emptyConfig, types.OCIEmptyJSON)
	layer := static.NewLayer(b.Bytes(), LayerMediaType)
	for _, l := range []v1.Layer{cfg, layer} {
		if err := remote.WriteLayer(r.repo, l, r.options(ctx)...); err != nil {
			return Stored{}, fmt.Errorf("pushing bundle %s to %s: %w", b.Session(), r.repo, err)
		}
	}
	raw, err := json.Marshal(artifactManifest(b, cfg, layer))
	if err != nil {
		return Stored{}, fmt.Errorf("encoding the OCI manifest: %w", err)
	}
	if err := remote.Put(r.repo.Tag(b.Session()), rawManifest(raw), r.options(ctx)...); err != nil {
		return Stored{}, fmt.Errorf("pushing the manifest of %s to %s: %w", b.Session(), r.repo, err)
	}
	h, _, _ := v1.SHA256(bytes.NewReader(raw))
	return Stored{SessionID: b.Session(), Digest: b.Digest(), Size: int64(len(b.Bytes())), Created: b.Manifest.Created,
		CheckpointSize: b.Manifest.Checkpoint.Size, Location: r.repo.Digest(h.String()).String()}, nil
}

// artifactManifest is the OCI manifest of b, whose blobs are cfg and layer.
func artifactManifest(b *Bundle, cfg, layer v1.Layer) *v1.Manifest {
	cd, _ := cfg.Digest()
	ld, _ := layer.Digest()
	m := &b.Manifest
	return &v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactType,
		Config:        v1.Descriptor{MediaType: types.OCIEmptyJSON, Size: int64(len(emptyConfig)), Digest: cd, Data: emptyConfig},
		Layers: []v1.Descriptor{{MediaType: LayerMediaType, Size: int64(len(b.Bytes())), Digest: ld,
			Annotations: map[string]string{AnnotationTitle: FileName(m.SessionID)}}},
		Annotations: map[string]string{
			AnnotationCreated:        m.Created.UTC().Format(time.RFC3339),
			AnnotationSession:        m.SessionID,
			AnnotationCheckpointSize: strconv.FormatUint(m.Checkpoint.Size, 10),
			AnnotationEntries:        strconv.Itoa(m.Entries),
		},
	}
}

// rawManifest is a manifest to put as it is, with the OCI manifest type.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Get pulls the bundle tagged key (a session) or the manifest whose digest
// is key, checks that it is a bundle artifact, and reads its layer, checking
// its size and digest as it reads.
func (r *Registry) Get(ctx context.Context, key string) (*Bundle, error) {
	ref, err := r.reference(key)
	if err != nil {
		return nil, err
	}
	mf, _, err := r.manifest(ctx, ref)
	if err != nil {
		return nil, err
	}
	ld := mf.Layers[0]
	l, err := remote.Layer(r.repo.Digest(ld.Digest.String()), r.options(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, ld.Size+1))
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	if int64(len(data)) != ld.Size || ld.Digest.String() != digestOf(data) {
		return nil, fmt.Errorf("%w: %s: the layer is not the %d bytes of %s that its manifest names", ErrTampered, ref, ld.Size, ld.Digest)
	}
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if !isDigest(key) && b.Session() != key {
		return nil, fmt.Errorf("%w: %s holds the bundle of session %q", ErrTampered, ref, event.Clip(b.Session(), 80))
	}
	return b, nil
}

func (r *Registry) reference(key string) (name.Reference, error) {
	if isDigest(key) {
		return r.repo.Digest(key), nil
	}
	if err := CheckSession(key); err != nil {
		return nil, err
	}
	return r.repo.Tag(key), nil
}

// manifest fetches and checks the OCI manifest of a bundle artifact.
// It returns the manifest and its digest.
func (r *Registry) manifest(ctx context.Context, ref name.Reference) (*v1.Manifest, v1.Hash, error) {
	desc, err := remote.Get(ref, r.options(ctx)...)
	if isNotFound(err) {
		return nil, v1.Hash{}, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("pulling %s: %w", ref, err)
	}
	if len(desc.Manifest) > maxManifestBytes {
		return nil, v1.Hash{}, fmt.Errorf("%w: %s: the OCI manifest is %d bytes", ErrMalformed, ref, len(desc.Manifest))
	}
	mf, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return nil, v1.Hash{}, fmt.Errorf("%w: %s: the OCI manifest: %v", ErrMalformed, ref, err)
	}
	if mf.ArtifactType != ArtifactType || len(mf.Layers) != 1 || mf.Layers[0].MediaType != LayerMediaType {
		return nil, v1.Hash{}, fmt.Errorf("%w: %s is not a session bundle (artifactType %q, %d layers)", ErrMalformed, ref, event.Clip(mf.ArtifactType, 80), len(mf.Layers))
	}
	if s := mf.Layers[0].Size; s <= 0 || s > MaxBundleSize {
		return nil, v1.Hash{}, fmt.Errorf("%w: %s: a layer of %d bytes", ErrMalformed, ref, s)
	}
	return mf, desc.Digest, nil
}

// List lists the repository's tags that name sessions and describes each
// bundle from its OCI manifest (its annotations are unverified). Tags that
// are not session bundles are left out.
func (r *Registry) List(ctx context.Context) ([]Stored, error) {
	tags, err := remote.List(r.repo, r.options(ctx)...)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", r.repo, err)
	}
	var out []Stored
	for _, tag := range tags {
		if CheckSession(tag) != nil {
			continue
		}
		ref := r.repo.Tag(tag)
		mf, digest, err := r.manifest(ctx, ref)
		if errors.Is(err, ErrMalformed) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, describeArtifact(r.repo, tag, mf, digest))
	}
	return out, nil
}

func describeArtifact(repo name.Repository, tag string, mf *v1.Manifest, digest v1.Hash) Stored {
	s := Stored{SessionID: tag, Digest: mf.Layers[0].Digest.String(), Size: mf.Layers[0].Size,
		Location: repo.Digest(digest.String()).String()}
	s.Created, _ = time.Parse(time.RFC3339, mf.Annotations[AnnotationCreated])
	s.CheckpointSize, _ = strconv.ParseUint(mf.Annotations[AnnotationCheckpointSize], 10, 64)
	return s
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// isLoopback reports whether a registry host[:port] is on loopback.
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// plainHTTPGuard refuses plain http to a host that is not on loopback,
// unless plain http was allowed: go-containerregistry itself falls back to
// http for private addresses and .local names.
type plainHTTPGuard struct {
	next     http.RoundTripper
	insecure bool
}

func (g *plainHTTPGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.insecure && !isLoopback(req.URL.Host) {
		return nil, fmt.Errorf("archive: refusing plain http to %s, which is not on loopback (allow it with --insecure)", req.URL.Host)
	}
	return g.next.RoundTrip(req)
}
