//go:build !linux

package cgroup

import "os"

// ID returns ErrNotSupported: cgroups are a Linux feature.
func ID(string) (uint64, error) { return 0, ErrNotSupported }

// FileID returns ErrNotSupported: cgroups are a Linux feature.
func FileID(*os.File) (uint64, error) { return 0, ErrNotSupported }
