package ingest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultSpoolFiles bounds the number of spooled batches.
const DefaultSpoolFiles = 10000

// ErrSpoolFull is wrapped when the spool already holds its maximum number of
// batches.
var ErrSpoolFull = errors.New("ingest: spool full")

// spool is a directory of undelivered request payloads, one file per batch.
// File names sort by the time they were written. A batch is written to a
// temporary name, fsynced, renamed into place and the directory fsynced, so
// a crash leaves either the whole batch or nothing.
type spool struct {
	dir      string
	maxFiles int
}

const spoolExt = ".batch"

var spoolCounter atomic.Uint64

func openSpool(dir string, maxFiles int) (*spool, error) {
	if dir == "" {
		return nil, errors.New("ingest: empty spool directory")
	}
	if maxFiles <= 0 {
		maxFiles = DefaultSpoolFiles
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating spool %s: %w", dir, err)
	}
	return &spool{dir: dir, maxFiles: maxFiles}, nil
}

func (s *spool) list() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing spool %s: %w", s.dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), spoolExt) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func (s *spool) put(payload []byte) error {
	names, err := s.list()
	if err != nil {
		return err
	}
	if len(names) >= s.maxFiles {
		return fmt.Errorf("%w: %d batches in %s", ErrSpoolFull, len(names), s.dir)
	}
	name := fmt.Sprintf("%020d-%08d-%06d-%s%s", time.Now().UnixNano(), os.Getpid(),
		spoolCounter.Add(1)%1_000_000, NewEventID()[:8], spoolExt)
	return s.write(name, payload)
}

// write stores payload under name atomically and durably.
func (s *spool) write(name string, payload []byte) error {
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("creating spool file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("setting spool file mode: %w", err)
	}
	if _, err := tmp.Write(payload); err != nil {
		tmp.Close()
		return fmt.Errorf("writing spool file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing spool file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing spool file: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, name)); err != nil {
		return fmt.Errorf("renaming spool file: %w", err)
	}
	return s.syncDir()
}

func (s *spool) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("opening spool directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing spool directory: %w", err)
	}
	return nil
}

// read returns a spooled payload, or nil if it has gone.
func (s *spool) read(name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading spool file: %w", err)
	}
	return b, nil
}

// replace swaps a spooled batch for what is left of it.
func (s *spool) replace(name string, payload []byte) error {
	return s.write(name, payload)
}

func (s *spool) remove(name string) error {
	if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing spool file: %w", err)
	}
	return s.syncDir()
}
