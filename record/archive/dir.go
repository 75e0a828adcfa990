package archive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/record/atomicfile"
	"github.com/sandtrail/sandtrail/record/event"
)

// Dir is a directory store: <dir>/<session>.bundle.tar.gz, each written
// atomically (a temporary file, synced, renamed, the directory synced).
type Dir struct {
	path string
}

var _ Store = (*Dir)(nil)

// NewDir returns the directory store at path. Put creates the directory
// (mode 0750) when it does not exist; Get and List do not.
func NewDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("archive: empty directory path")
	}
	return &Dir{path: path}, nil
}

// Path returns the store's directory.
func (d *Dir) Path() string { return d.path }

// Put writes the bundle's file, replacing the session's older one.
func (d *Dir) Put(_ context.Context, b *Bundle) (Stored, error) {
	if err := CheckSession(b.Session()); err != nil {
		return Stored{}, err
	}
	name := FileName(b.Session())
	if err := os.MkdirAll(d.path, 0o750); err != nil {
		return Stored{}, fmt.Errorf("creating the archive directory: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(d.path, name), b.Bytes(), 0o640); err != nil {
		return Stored{}, fmt.Errorf("storing bundle %s: %w", name, err)
	}
	return d.describe(b, filepath.Join(d.path, name)), nil
}

func (d *Dir) describe(b *Bundle, file string) Stored {
	return Stored{SessionID: b.Session(), Digest: b.Digest(), Size: int64(len(b.Bytes())),
		Created: b.Manifest.Created, CheckpointSize: b.Manifest.Checkpoint.Size, Location: file}
}

// Get reads and parses the bundle of a session, or the one whose digest
// is key.
func (d *Dir) Get(ctx context.Context, key string) (*Bundle, error) {
	if isDigest(key) {
		return d.byDigest(ctx, key)
	}
	if err := CheckSession(key); err != nil {
		return nil, err
	}
	file := filepath.Join(d.path, FileName(key))
	b, err := readBundle(file)
	if err != nil {
		return nil, err
	}
	if b.Session() != key {
		return nil, fmt.Errorf("%w: %s holds the bundle of session %q", ErrTampered, file, event.Clip(b.Session(), 80))
	}
	return b, nil
}

func (d *Dir) byDigest(ctx context.Context, digest string) (*Bundle, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := readFile(filepath.Join(d.path, n))
		if err != nil {
			return nil, err
		}
		if digestOf(data) == digest {
			return parseFile(filepath.Join(d.path, n), data)
		}
	}
	return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, digest, d.path)
}

// List describes each bundle file of the directory. A file that does not
// parse is an error naming it.
func (d *Dir) List(ctx context.Context) ([]Stored, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	out := make([]Stored, 0, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := readBundle(filepath.Join(d.path, n))
		if err != nil {
			return nil, err
		}
		out = append(out, d.describe(b, filepath.Join(d.path, n)))
	}
	return out, nil
}

// names returns the bundle file names of the directory, sorted.
func (d *Dir) names() ([]string, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("listing the archive directory: %w", err)
	}
	var out []string
	for _, e := range ents {
		s, ok := strings.CutSuffix(e.Name(), FileSuffix)
		if ok && e.Type().IsRegular() && CheckSession(s) == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// ReadFile reads and parses a bundle file (Parse: layout only).
func ReadFile(path string) (*Bundle, error) { return readBundle(path) }

func readBundle(path string) (*Bundle, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return parseFile(path, data)
}

func parseFile(path string, data []byte) (*Bundle, error) {
	b, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// readFile reads a bundle file of at most MaxBundleSize bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading bundle: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBundleSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading bundle: %w", err)
	}
	if len(data) > MaxBundleSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrMalformed, path, MaxBundleSize)
	}
	return data, nil
}
