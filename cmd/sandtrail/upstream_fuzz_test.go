package main

import (
	"fmt"
	"strings"
	"testing"

	mirror "github.com/sandtrail/sandtrail/registry-mirror"
)

// FuzzParseUpstreams: --upstream values (joined by NUL here) are either
// all taken, each as ECOSYSTEM=URL that mirror.CheckUpstream accepts and
// at most one per key, or refused by an error that quotes the value at
// fault.
func FuzzParseUpstreams(f *testing.F) {
	for _, s := range []string{
		"npm=https://registry.npmjs.org/", "deb=http://deb.debian.org/debian/\x00deb/debian-security=http://security.debian.org/debian-security/",
		"npm=https://a/\x00npm=https://b/", "npm", "=https://a/", "npm=", "npm=ftp://a/", "pypi=http://127.0.0.1:9/simple/\x00oci=https://r/v2/",
		"npm=https://a/=b", "deb=[signed-by=/k.gpg] http://deb.debian.org/debian/", "cargo/x=https://index.crates.io/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		flags := strings.Split(joined, "\x00")
		cfg := &Config{}
		err := parseUpstreams(cfg, flags)
		if err != nil {
			quoted := false
			for _, u := range flags {
				quoted = quoted || strings.Contains(err.Error(), fmt.Sprintf("--upstream %q", u))
			}
			if !quoted {
				t.Fatalf("parseUpstreams(%q) = %v, which quotes none of the values", flags, err)
			}
			return
		}
		if len(cfg.Mirror.Upstreams) != len(flags) {
			t.Fatalf("parseUpstreams(%q) took %d upstreams, want one per value: %v", flags, len(cfg.Mirror.Upstreams), cfg.Mirror.Upstreams)
		}
		for _, u := range flags {
			eco, raw, _ := strings.Cut(u, "=")
			if cfg.Mirror.Upstreams[eco] != raw {
				t.Fatalf("parseUpstreams(%q): %s is %q, want %q", flags, eco, cfg.Mirror.Upstreams[eco], raw)
			}
			if err := mirror.CheckUpstream(eco, raw); err != nil {
				t.Fatalf("parseUpstreams(%q) took %s=%s, which CheckUpstream refuses: %v", flags, eco, raw, err)
			}
		}
	})
}
