package intel

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// File is one OSV record file that Read found.
type File struct {
	// Name says where it is: a path, or ZIP!ENTRY for a zip's entry.
	Name string
	// Data is its bytes, at most MaxRecordSize (nil when it was larger:
	// Err says so).
	Data []byte
	// Withdrawn: the file lies in a withdrawn/ directory (the
	// malicious-packages project moves false positives to osv/withdrawn/).
	Withdrawn bool
	// Staging: a MAL-0000-… file, which the project has not given an id
	// yet; Data is not read.
	Staging bool
	// Err is why the file could not be read.
	Err error
}

// Read calls fn with each OSV record file of path, which is one of:
//
//   - a checkout of ossf/malicious-packages (or any directory tree): every
//     MAL-*.json beneath it, withdrawn when a directory of its path is
//     named withdrawn (osv/withdrawn/…), and every *.zip;
//   - an osv.dev export: an all.zip, or a directory of them
//     (<ECOSYSTEM>/all.zip), whose *.json entries are records;
//   - one record's .json file.
//
// Directories named .git are not entered. An error from fn stops Read and
// is returned; a file that cannot be read is given to fn with Err set.
func Read(root string, fn func(File) error) error {
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("reading intel source: %w", err)
	}
	if !fi.IsDir() {
		if strings.HasSuffix(strings.ToLower(root), ".zip") {
			return readZip(root, fn)
		}
		return fn(readFile(root, isWithdrawnPath(root)))
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fn(File{Name: p, Err: err})
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		switch name := d.Name(); {
		case strings.HasSuffix(strings.ToLower(name), ".zip"):
			return readZip(p, fn)
		case strings.HasPrefix(name, "MAL-0000-") && strings.HasSuffix(name, ".json"):
			return fn(File{Name: p, Staging: true})
		case strings.HasPrefix(name, "MAL-") && strings.HasSuffix(name, ".json"):
			return fn(readFile(p, isWithdrawnPath(p)))
		}
		return nil
	})
}

// isWithdrawnPath reports whether a directory of p is named withdrawn.
func isWithdrawnPath(p string) bool {
	dirs := strings.Split(filepath.ToSlash(filepath.Dir(p)), "/")
	return slices.Contains(dirs, "withdrawn")
}

func readFile(p string, withdrawn bool) File {
	f := File{Name: p, Withdrawn: withdrawn}
	fh, err := os.Open(p)
	if err != nil {
		f.Err = err
		return f
	}
	defer fh.Close()
	f.Data, f.Err = readCapped(fh)
	return f
}

// readCapped reads r, refusing more than MaxRecordSize bytes.
func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxRecordSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecordSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrInvalid, MaxRecordSize)
	}
	return b, nil
}

// readZip gives fn each .json entry of the zip at p. Entries whose name
// is not a MAL- id are passed over unread, but counted as not malicious:
// an osv.dev export holds every advisory of its ecosystem.
func readZip(p string, fn func(File) error) error {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return fn(File{Name: p, Err: fmt.Errorf("opening zip: %w", err)})
	}
	defer zr.Close()
	for _, zf := range zr.File {
		base := path.Base(zf.Name)
		if zf.FileInfo().IsDir() || !strings.HasSuffix(base, ".json") {
			continue
		}
		f := File{Name: p + "!" + zf.Name, Withdrawn: isWithdrawnPath(zf.Name)}
		switch {
		case strings.HasPrefix(base, "MAL-0000-"):
			f.Staging = true
		case !strings.HasPrefix(base, "MAL-"):
			f.Err = ErrNotMalicious
		case zf.UncompressedSize64 > MaxRecordSize:
			f.Err = fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, zf.UncompressedSize64, MaxRecordSize)
		default:
			rc, err := zf.Open()
			if err != nil {
				f.Err = err
			} else {
				f.Data, f.Err = readCapped(rc)
				rc.Close()
			}
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}
