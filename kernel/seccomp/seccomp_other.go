//go:build !linux || !(amd64 || arm64)

package seccomp

// Start returns ErrNotSupported: the filter is built for Linux on amd64 and
// arm64 only. It does not call start: a session must not run unfiltered.
func (f *Filter) Start(start func() error) error { return ErrNotSupported }
