package pypitest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// distName is a name as wheel file names and .dist-info directories
// write it (the binary distribution format's escaping).
func distName(name string) string { return strings.ToLower(separators.ReplaceAllString(name, "_")) }

var separators = regexp.MustCompile(`[-_.]+`)

// WheelName is the file name of a version's pure-Python wheel.
func WheelName(name, version string) string {
	return distName(name) + "-" + version + "-py3-none-any.whl"
}

// SdistName is the file name of a version's sdist.
func SdistName(name, version string) string { return distName(name) + "-" + version + ".tar.gz" }

// Metadata is the core metadata (METADATA) of a version, which is also
// its PEP 658 metadata file.
func Metadata(name string, v Version) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: a sandtrail test fixture\n", name, v.Version)
	if v.RequiresPython != "" {
		fmt.Fprintf(&b, "Requires-Python: %s\n", v.RequiresPython)
	}
	for _, d := range v.Deps {
		fmt.Fprintf(&b, "Requires-Dist: %s\n", d)
	}
	return []byte(b.String())
}

// Module is the name of the module a version's wheel installs.
func Module(name string) string { return distName(name) }

// Wheel builds a version's wheel: a module that holds its version, and a
// .dist-info with METADATA, WHEEL and a RECORD of every file's sha256, as
// pip installs it.
func Wheel(name string, v Version) []byte {
	info := distName(name) + "-" + v.Version + ".dist-info/"
	files := []struct{ path, body string }{
		{Module(name) + "/__init__.py", fmt.Sprintf("__version__ = %q\n", v.Version)},
		{info + "METADATA", string(Metadata(name, v))},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: sandtrail-pypitest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(path, body string) {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: path, Method: zip.Deflate, Modified: time.Unix(499162500, 0).UTC()})
		w.Write([]byte(body))
	}
	for _, f := range files {
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
		add(f.path, f.body)
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	add(info+"RECORD", record.String())
	zw.Close()
	return buf.Bytes()
}
