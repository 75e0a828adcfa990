package archive

import (
	"context"
	"fmt"
	"github.com/sandtrail/sandtrail/record/event"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Store keeps sealed bundles, one per session. A store is not trusted:
// whatever Get returns has passed Parse only, and must be verified.
type Store interface {
	// Put stores the bundle under its session, replacing an older one.
	Put(ctx context.Context, b *Bundle) (Stored, error)
	// Get returns the bundle of a session, or of a digest
	// ("sha256:<hex>"); errors wrap ErrNotFound when there is none.
	Get(ctx context.Context, key string) (*Bundle, error)
	// List describes the stored bundles, ordered by session.
	List(ctx context.Context) ([]Stored, error)
}

// Stored describes one bundle in a store.
type Stored struct {
	SessionID string `json:"session_id"`
	// Digest is the bundle file's digest.
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Created and CheckpointSize are what the bundle's manifest (or, in a
	// registry, the manifest's annotations) says: unverified.
	Created        time.Time `json:"created,omitzero"`
	CheckpointSize uint64    `json:"checkpoint_size,omitempty"`
	// Location is the bundle's file, or its reference by manifest digest
	// in a registry; empty when Archive kept a stored bundle.
	Location string `json:"location,omitempty"`
	// Kept is set when Archive kept the bundle the store already held,
	// which holds every entry of the session the journal still has.
	Kept bool `json:"kept,omitempty"`
}

// StoreOption configures OpenStore and NewRegistry.
type StoreOption func(*storeOptions)

// AllowPlainHTTP lets a registry store talk plain http to a registry
// that is not on loopback (loopback may always).
func AllowPlainHTTP() StoreOption { return func(o *storeOptions) { o.insecure = true } }

// OpenStore opens the store that target names: "oci://REF" or a registry
// reference whose first part is a host (has a "." or a ":", or is
// "localhost") is a registry repository; "dir:PATH", an absolute or
// ./-relative path, or an existing directory is a directory store.
func OpenStore(target string, opts ...StoreOption) (Store, error) {
	if ref, ok := strings.CutPrefix(target, "oci://"); ok {
		return registryStore(ref, opts)
	}
	if dir, ok := strings.CutPrefix(target, "dir:"); ok {
		return dirStore(dir)
	}
	if filepath.IsAbs(target) || strings.HasPrefix(target, "./") || strings.HasPrefix(target, "../") || target == "." {
		return dirStore(target)
	}
	if st, err := os.Stat(target); err == nil && st.IsDir() {
		return dirStore(target)
	}
	host, _, _ := strings.Cut(target, "/")
	if strings.ContainsAny(host, ".:") || host == "localhost" {
		return registryStore(target, opts)
	}
	return nil, fmt.Errorf("archive: %q names neither a directory nor a registry: write oci://HOST/REPO or ./DIR", event.Clip(target, 120))
}

// isDigest reports whether key is a sha256 digest rather than a session.
func isDigest(key string) bool {
	hex, ok := strings.CutPrefix(key, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	return strings.Trim(hex, "0123456789abcdef") == ""
}

// registryStore and dirStore return a nil Store, not a nil pointer in one,
// on error.
func registryStore(ref string, opts []StoreOption) (Store, error) {
	r, err := NewRegistry(ref, opts...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func dirStore(path string) (Store, error) {
	d, err := NewDir(path)
	if err != nil {
		return nil, err
	}
	return d, nil
}
