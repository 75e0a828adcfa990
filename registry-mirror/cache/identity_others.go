//go:build !linux

package cache

import (
	"io/fs"
	"time"
)

// identityOf is what says a blob's file is the one the cache stored: its
// size and modification time.
func identityOf(fi fs.FileInfo) identity {
	return identity{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}

// accessTime is when the blob was last served: its modification time,
// where the access time is not read.
func accessTime(fi fs.FileInfo) time.Time { return fi.ModTime() }
