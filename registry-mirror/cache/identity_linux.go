//go:build linux

package cache

import (
	"io/fs"
	"syscall"
	"time"
)

// identityOf is what says a blob's file is the one the cache stored: its
// inode, size, modification time and status change time, which any write,
// rename over it or setting of its times moves (and only a change of the
// system's clock can put back).
func identityOf(fi fs.FileInfo) identity {
	id := identity{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.ino, id.ctime = uint64(st.Ino), st.Ctim.Nano()
	}
	return id
}

// accessTime is when the blob was last served: its file's access time.
func accessTime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(int64(st.Atim.Sec), int64(st.Atim.Nsec))
	}
	return fi.ModTime()
}
