package session

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// snapshot writes a tar of dir to dst and returns the tar's sha256 in hex.
// It stores regular files, directories and symlinks (as links, never
// followed: the workdir's content is the agent's), and skips devices,
// fifos and sockets, which a tar of a workdir has no use for and which
// could block a reader. Regular files are opened with O_NOFOLLOW.
func snapshot(ctx context.Context, dir, dst string) (string, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("creating snapshot: %w", err)
	}
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	werr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		var link string
		switch {
		case info.Mode().IsRegular(), info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		src, err := openNoFollow(p)
		if err != nil {
			return err
		}
		defer src.Close()
		// Copy exactly the size in the header: a file that changed size
		// since would otherwise corrupt the archive.
		if _, err := io.CopyN(tw, src, hdr.Size); err != nil {
			return fmt.Errorf("copying %s: %w", rel, err)
		}
		return nil
	})
	cerr := tw.Close()
	ferr := f.Close()
	if err := errors.Join(werr, cerr, ferr); err != nil {
		os.Remove(dst)
		return "", fmt.Errorf("writing snapshot: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
