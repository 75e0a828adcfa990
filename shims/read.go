package shims

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"syscall"
)

// ErrNotRegular is the error of a manifest, lockfile, requirements or
// configuration file that is not a regular file: a FIFO or a device could
// answer the planner and the real manager differently, so a planner
// refuses it.
var ErrNotRegular = errors.New("shims: not a regular file")

// OpenRegular opens the regular file name for reading. It opens without
// blocking (a FIFO put in place cannot hang the shim), checks the open
// file, and returns an error wrapping ErrNotRegular for anything but a
// regular file or a directory, and one wrapping syscall.EISDIR for a
// directory (which the manager cannot read either).
func OpenRegular(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("reading %s: %w", name, err)
	case fi.IsDir():
		err = fmt.Errorf("reading %s: %w", name, syscall.EISDIR)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("reading %s: %w (%s)", name, ErrNotRegular, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the regular file name (see OpenRegular), of at most max
// bytes.
func ReadFile(name string, max int64) ([]byte, error) {
	f, err := OpenRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", name, max)
	}
	return b, nil
}

// LazyRegexp returns a function that returns expr compiled, compiling it
// on its first call: the shim starts before every package-manager call,
// and most of them never match an expression.
func LazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
