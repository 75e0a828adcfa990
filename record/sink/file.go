package sink

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// File is a Sink that appends JSON lines to a file and rotates it: past
// MaxBytes the file is renamed PATH.1 (PATH.1 to PATH.2, and so on, the
// oldest past Keep removed) and a new one is begun. Each Write is synced
// before it returns.
type File struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
}

var _ Sink = (*File)(nil)

// Default rotation of a File.
const (
	DefaultFileMaxBytes = 100 << 20
	DefaultFileKeep     = 10
)

// NewFile opens (or creates, 0600) the file at path; maxBytes and keep of
// 0 take the defaults.
func NewFile(path string, maxBytes int64, keep int) (*File, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultFileMaxBytes
	}
	if keep <= 0 {
		keep = DefaultFileKeep
	}
	s := &File{path: path, maxBytes: maxBytes, keep: keep}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *File) open() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("file sink: %w", err)
	}
	s.f, s.size = f, fi.Size()
	return nil
}

// Write appends the batch, one line an entry, rotating first when the
// file is full, and syncs it.
func (s *File) Write(_ context.Context, batch []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return fmt.Errorf("file sink %s: closed", s.path)
	}
	if s.size >= s.maxBytes {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	w := bufio.NewWriter(s.f)
	n, err := writeLines(w, batch)
	s.size += n
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	return nil
}

func writeLines(w io.Writer, batch []Entry) (int64, error) {
	var n int64
	for _, e := range batch {
		k, err := w.Write(append(e.Line, '\n'))
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// rotate shifts PATH.i to PATH.i+1 (dropping PATH.keep), PATH to PATH.1,
// and opens a new PATH.
func (s *File) rotate() error {
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	s.f = nil
	os.Remove(fmt.Sprintf("%s.%d", s.path, s.keep))
	for i := s.keep - 1; i >= 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", s.path, i), fmt.Sprintf("%s.%d", s.path, i+1))
	}
	if err := os.Rename(s.path, s.path+".1"); err != nil {
		return fmt.Errorf("file sink: rotating %s: %w", s.path, err)
	}
	return s.open()
}

// Close closes the file.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Stream is a Sink that writes JSON lines to a writer, such as stdout.
type Stream struct {
	mu sync.Mutex
	w  io.Writer
}

var _ Sink = (*Stream)(nil)

// NewStream returns a Stream to w.
func NewStream(w io.Writer) *Stream { return &Stream{w: w} }

// Write writes the batch, one line an entry.
func (s *Stream) Write(_ context.Context, batch []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := writeLines(s.w, batch)
	return err
}

// Close does nothing: the writer is the caller's.
func (s *Stream) Close() error { return nil }
