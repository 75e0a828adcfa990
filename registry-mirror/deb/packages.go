package deb

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver/purl"
)

// Bounds on a Packages paragraph.
const (
	maxPackagesLine = 1 << 20
	maxParagraph    = 4 << 20
)

// packageFields are the fields of a Packages paragraph the mirror reads.
var packageFields = map[string]bool{"package": true, "version": true, "architecture": true, "filename": true, "size": true, "sha256": true}

// eachPackage reads Packages paragraphs from r, streaming, and calls fn
// with each one's Filename and entry. A malformed paragraph, or one
// without Package, Version, Filename, Size or SHA256, is an error wrapping
// ErrSyntax that names its line.
func eachPackage(r io.Reader, fn func(filename string, e debEntry) error) error {
	sc := newScanner(r, maxPackagesLine, maxParagraph, func(n string) bool { return packageFields[n] })
	for {
		fields, line, err := sc.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading Packages: %w", err)
		}
		name, e, err := entryOf(fields)
		if err != nil {
			return fmt.Errorf("%w: Packages paragraph at line %d: %v", ErrSyntax, line, err)
		}
		if err := fn(name, e); err != nil {
			return err
		}
	}
}

// entryOf reads one paragraph's fields.
func entryOf(fields []field) (string, debEntry, error) {
	var v [5]string
	for i, n := range []string{"package", "version", "filename", "size", "sha256"} {
		s, ok := get(fields, n)
		if !ok || s == "" || strings.ContainsAny(s, " \t\n") {
			return "", debEntry{}, fmt.Errorf("no single-word %s field", n)
		}
		v[i] = s
	}
	if !validPackage(v[0]) || len(v[1]) > 256 {
		return "", debEntry{}, fmt.Errorf("bad package %q or version %q", event.Clip(v[0], 80), event.Clip(v[1], 80))
	}
	if _, err := splitPath(v[2]); err != nil {
		return "", debEntry{}, fmt.Errorf("Filename %q: %v", event.Clip(v[2], 80), err)
	}
	s, err := parseSum(v[4], v[3])
	if err != nil {
		return "", debEntry{}, err
	}
	return v[2], debEntry{sum: s, pkg: v[0], version: v[1], arch: archOf(fields)}, nil
}

// archOf reads a paragraph's Architecture for the purl: one word of at most
// 32 bytes, [a-z0-9-], else "" (the purl then has no arch; the field names
// the package, it verifies nothing, so an odd one does not refuse the
// index). The common ones share one string each, so that a bookworm
// index's 63,440 entries do not hold as many copies.
func archOf(fields []field) string {
	a, _ := get(fields, "architecture")
	if a == "" || len(a) > 32 || strings.Trim(a, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return ""
	}
	for _, c := range commonArchs {
		if a == c {
			return c
		}
	}
	return a
}

// commonArchs are the architectures archOf shares.
var commonArchs = []string{"all", "amd64", "arm64", "armhf", "i386", "ppc64el", "s390x", "riscv64", "armel", "mips64el"}

// validPackage: a Debian package name, [a-z0-9][a-z0-9+.-]+, at most 128
// bytes.
func validPackage(s string) bool {
	if len(s) < 2 || len(s) > 128 || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// serveDeb serves the pool file p (an archive path) once a verified
// Packages file lists it, the policy allows it and its bytes match, and
// records it.
func (h *Handler) serveDeb(w http.ResponseWriter, r *http.Request, a *archive, p string) error {
	start := time.Now()
	rec := &fetch.Record{Ecosystem: Ecosystem, URL: a.fileURL(p), Registry: a.base.String(), Client: fetch.ClientOf(r.Context())}
	art, f, err := h.deb(r.Context(), a, p, rec)
	rec.Latency = time.Since(start)
	rec.Failed(err)
	h.env.Record(rec)
	if err != nil {
		return err
	}
	defer f.Close()
	fetch.Serve(w, r, art, f, "application/vnd.debian.binary-package")
	return nil
}

// deb does serveDeb's work up to the bytes, verified, filling rec.
func (h *Handler) deb(ctx context.Context, a *archive, p string, rec *fetch.Record) (cache.Artifact, *cache.Body, error) {
	var none cache.Artifact
	e, ok := h.pool.lookup(ctx, a, p)
	if !ok {
		rec.Name, rec.Version = nameOfFile(path.Base(p))
		rec.Outcome, rec.Verdict, rec.Rule = fetch.Blocked, "block", "deb.packages"
		rec.Reason = "no verified Packages file of the archive lists it"
		return none, nil, fetch.Errorf(http.StatusForbidden, fetch.Blocked, nil,
			"%s: no verified Packages file of archive %s lists it (fetch the indexes through the mirror first: apt-get update)", event.Clip(p, 80), a.name)
	}
	rec.Name, rec.Version, rec.Hash = e.pkg, e.version, "sha256:"+e.sum.hex()
	rec.Purl = purl.Deb(e.pkg, e.version, e.arch)
	out, d := h.env.Decide(ctx, policies.PackageRequest{Ecosystem: Ecosystem, Name: e.pkg, Version: e.version, Source: rec.URL, Registry: rec.Registry})
	rec.Verdict = string(d.Verdict)
	if d.Verdict != policies.Allow {
		rec.Reason, rec.Rule = d.Reason, d.Rule
	}
	if out != fetch.Served {
		rec.Outcome = out
		return none, nil, fetch.Errorf(http.StatusForbidden, out, nil, "%s %s is refused by the policy (%s): %s", e.pkg, e.version, d.Rule, d.Reason)
	}
	want := wantOf(rec.URL, e.sum)
	want.Ecosystem, want.Name = Ecosystem, e.pkg
	art, f, hit, err := h.artifacts.Get(ctx, want)
	if err != nil {
		if fetch.Mismatch(err) {
			return none, nil, rec.Refused(fetch.HashMismatch, err, "%s %s does not match the SHA256 of its verified Packages file", e.pkg, e.version)
		}
		return none, nil, err
	}
	rec.ServedArtifact(art, hit)
	return art, f, nil
}

// nameOfFile reads a pool file name, "<package>_<version>_<arch>.deb", for
// the record of a refusal; it is what the client asked for, unverified.
func nameOfFile(base string) (string, string) {
	f := strings.Split(strings.TrimSuffix(strings.TrimSuffix(base, ".deb"), ".udeb"), "_")
	if len(f) != 3 {
		return "", ""
	}
	return f[0], f[1]
}
