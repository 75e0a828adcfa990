//go:build !unix

package journal

import "os"

// lockDir is not supported: the journal relies on flock.
func lockDir(string) (*os.File, error) { return nil, ErrNotSupported }
