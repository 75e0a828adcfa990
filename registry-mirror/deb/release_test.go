package deb

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDebianInRelease: a real InRelease of Debian's archive
// (bookworm-updates, signed by several keys) verifies against the
// debian-archive-keyring package's keyring, and its SHA256 list is read;
// the same bytes with one changed do not verify.
func TestDebianInRelease(t *testing.T) {
	keys, err := readKeyring(DefaultKeyring)
	if err != nil {
		t.Skipf("no Debian keyring: %v", err)
	}
	b, err := os.ReadFile("testdata/bookworm-updates.InRelease")
	if err != nil {
		t.Fatal(err)
	}
	a := &archive{name: "debian", keys: keys}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ri, err := a.verify(signed{InRelease: b}, "bookworm-updates", now)
	if err != nil {
		t.Fatalf("verify = %v", err)
	}
	if _, ok := ri.files["main/binary-amd64/Packages.xz"]; !ok || ri.suite != "oldstable-updates" || len(ri.files) < 100 {
		t.Errorf("read %d files, suite %q", len(ri.files), ri.suite)
	}
	if _, err := a.verify(signed{InRelease: b}, "trixie-updates", now); !errors.Is(err, ErrSuite) {
		t.Errorf("another suite's Release = %v, want ErrSuite", err)
	}
	bad := []byte(strings.Replace(string(b), "Label: Debian", "Label: Debiam", 1))
	if _, err := a.verify(signed{InRelease: bad}, "bookworm-updates", now); !errors.Is(err, ErrSignature) {
		t.Errorf("changed text = %v, want ErrSignature", err)
	}
	trailing := append(append([]byte{}, b...), "\nSHA256:\n x\n"...)
	if _, err := a.verify(signed{InRelease: trailing}, "bookworm-updates", now); !errors.Is(err, ErrSignature) {
		t.Errorf("data after the signature = %v, want ErrSignature", err)
	}
}

func TestParseRelease(t *testing.T) {
	h := strings.Repeat("ab", 32)
	tests := []struct {
		name, in, err string
	}{
		{name: "good", in: "Suite: stable\nValid-Until: Sat, 10 Aug 2024 09:24:08 UTC\nSHA256:\n " + h + " 12 main/binary-amd64/Packages\n"},
		{name: "no sums", in: "Suite: stable\n", err: "no SHA256"},
		{name: "bad hex", in: "SHA256:\n zz 12 main/Packages\n", err: "not a sha256"},
		{name: "bad size", in: "SHA256:\n " + h + " -1 main/Packages\n", err: "not a size"},
		{name: "traversal", in: "SHA256:\n " + h + " 1 ../../etc/passwd\n", err: "path"},
		{name: "duplicate", in: "SHA256:\n " + h + " 1 a\n " + h + " 1 a\n", err: "twice"},
		{name: "two fields", in: "SHA256:\n " + h + " 1\n", err: "want"},
		{name: "bad date", in: "Valid-Until: tomorrow\nSHA256:\n " + h + " 1 a\n", err: "Valid-Until"},
		{name: "continuation first", in: " x\nSHA256:\n", err: "continuation"},
		{name: "no colon", in: "Suite stable\n", err: "neither"},
		{name: "duplicate field", in: "Suite: a\nsuite: b\n", err: "twice"},
		{name: "binary", in: "Suite: a\x00\n", err: "not text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRelease([]byte(tt.in))
			if (tt.err == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrSyntax))) {
				t.Errorf("parseRelease(%q) = %v, want %q", tt.in, err, tt.err)
			}
		})
	}
}

func TestEachPackage(t *testing.T) {
	h := strings.Repeat("0f", 32)
	good := "Package: hello\nVersion: 1:2.10-3\nFilename: pool/main/h/hello/hello_2.10-3_amd64.deb\nSize: 10\nSHA256: " + h + "\nDescription: x\n long\n"
	tests := []struct {
		name, in, err string
		n             int
	}{
		{name: "two", in: good + "\n\n" + strings.Replace(good, "hello", "world", -1), n: 2},
		{name: "no sha256", in: strings.Replace(good, "SHA256: "+h+"\n", "", 1), err: "sha256"},
		{name: "bad filename", in: strings.Replace(good, "pool/main", "pool/../main", 1), err: "Filename"},
		{name: "bad name", in: strings.Replace(good, "Package: hello", "Package: Hello World", 1), err: "package"},
		{name: "long line", in: "Package: " + strings.Repeat("a", maxPackagesLine+1) + "\n", err: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := eachPackage(strings.NewReader(tt.in), func(string, debEntry) error { n++; return nil })
			if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) || (err == nil && n != tt.n) {
				t.Errorf("eachPackage = %d, %v; want %d, %q", n, err, tt.n, tt.err)
			}
			if err != nil && !errors.Is(err, ErrSyntax) {
				t.Errorf("error %v does not wrap ErrSyntax", err)
			}
		})
	}
}
