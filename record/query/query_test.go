package query

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/resolver/purl"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   Args
		want Filter
		err  string // substring of the error; "" means success
	}{
		{name: "empty", in: Args{}, want: Filter{}},
		{name: "session", in: Args{Session: "s-1"}, want: Filter{Session: "s-1"}},
		{name: "session with space", in: Args{Session: "a b"}, err: "--session"},
		{name: "session too long", in: Args{Session: strings.Repeat("x", 129)}, err: "--session"},
		{name: "since rfc3339", in: Args{Since: "2026-11-29T08:00:00Z"},
			want: Filter{Since: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}},
		{name: "since date", in: Args{Since: "2026-11-28"},
			want: Filter{Since: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}},
		{name: "since 2h", in: Args{Since: "2h"}, want: Filter{Since: now.Add(-2 * time.Hour)}},
		{name: "since 30m", in: Args{Since: "30m"}, want: Filter{Since: now.Add(-30 * time.Minute)}},
		{name: "since 7d", in: Args{Since: "7d"}, want: Filter{Since: now.Add(-7 * 24 * time.Hour)}},
		{name: "since 1h30m", in: Args{Since: "1h30m"}, want: Filter{Since: now.Add(-90 * time.Minute)}},
		{name: "until 2w", in: Args{Until: "2w"}, want: Filter{Until: now.Add(-14 * 24 * time.Hour)}},
		{name: "since negative", in: Args{Since: "-2h"}, err: "--since"},
		{name: "since garbage", in: Args{Since: "yesterday"}, err: "--since"},
		{name: "since huge days", in: Args{Since: "99999999999d"}, err: "--since"},
		{name: "until garbage", in: Args{Until: "2026-13-01"}, err: "--until"},
		{name: "since after until", in: Args{Since: "1h", Until: "2h"}, err: "is not before --until"},
		{name: "kinds", in: Args{Kind: "file.read, net.connect"},
			want: Filter{Kinds: []Kind{{Name: "file.read"}, {Name: "net.connect"}}}},
		{name: "kind prefix dot", in: Args{Kind: "file."}, want: Filter{Kinds: []Kind{{Name: "file.", Prefix: true}}}},
		{name: "kind prefix star", in: Args{Kind: "file.*"}, want: Filter{Kinds: []Kind{{Name: "file.", Prefix: true}}}},
		{name: "kind bare category", in: Args{Kind: "pkg"}, want: Filter{Kinds: []Kind{{Name: "pkg.", Prefix: true}}}},
		{name: "kind alert", in: Args{Kind: "alert"}, want: Filter{Kinds: []Kind{{Name: "alert"}}}},
		{name: "kind unknown category", in: Args{Kind: "fiel.read"}, err: `unknown category "fiel"`},
		{name: "kind empty entry", in: Args{Kind: "file.read,,net."}, err: "empty entry"},
		{name: "kind star inside", in: Args{Kind: "file*.read"}, err: "only allowed at the end"},
		{name: "kind upper", in: Args{Kind: "FILE.read"}, err: "--kind"},
		{name: "path prefix", in: Args{Path: "/etc/ssh/"}, want: Filter{Path: &PathMatch{Pattern: "/etc/ssh"}}},
		{name: "path NUL", in: Args{Path: "/etc/\x00"}, err: "NUL"},
		{name: "path bad glob", in: Args{Path: "/etc/[abc"}, err: "unterminated ["},
		{name: "path bad range", in: Args{Path: "/etc/[z-a]"}, err: "bad range"},
		{name: "domain", in: Args{Domain: "Example.COM."}, want: Filter{Domain: &DomainMatch{Name: "example.com"}}},
		{name: "domain suffix", in: Args{Domain: "*.example.com"}, want: Filter{Domain: &DomainMatch{Name: "example.com", Suffix: true}}},
		{name: "domain star only", in: Args{Domain: "*"}, err: "--domain"},
		{name: "domain inner star", in: Args{Domain: "a.*.com"}, err: `"*" is only allowed`},
		{name: "domain empty label", in: Args{Domain: "a..com"}, err: "empty or over-long label"},
		{name: "domain bad char", in: Args{Domain: "ex ample.com"}, err: "not allowed"},
		{name: "package any", in: Args{Package: "npm:lodash"}, want: Filter{Package: &PackageMatch{Ecosystem: "npm", Name: "lodash"}}},
		{name: "package exact", in: Args{Package: "npm:lodash@4.17.20"},
			want: Filter{Package: &PackageMatch{Ecosystem: "npm", Name: "lodash", Version: "4.17.20"}}},
		{name: "package scoped", in: Args{Package: "npm:@babel/core@7.24.0"},
			want: Filter{Package: &PackageMatch{Ecosystem: "npm", Name: "@babel/core", Version: "7.24.0"}}},
		{name: "package purl", in: Args{Package: "pkg:npm/lodash@4.17.20"},
			want: Filter{Package: &PackageMatch{Ecosystem: "npm", Name: "lodash", Version: "4.17.20"}}},
		{name: "package purl scoped", in: Args{Package: "pkg:npm/%40babel/core@7.24.0?x=1#sub"},
			want: Filter{Package: &PackageMatch{Ecosystem: "npm", Name: "@babel/core", Version: "7.24.0"}}},
		{name: "package purl deb", in: Args{Package: "pkg:deb/debian/curl@7.88.1-10%2Bdeb12u5?arch=amd64"},
			want: Filter{Package: &PackageMatch{Ecosystem: "deb", Name: "curl", Version: "7.88.1-10+deb12u5"}}},
		{name: "package pypi normalized", in: Args{Package: "pypi:Typing_Extensions@4.12.2"},
			want: Filter{Package: &PackageMatch{Ecosystem: "pypi", Name: "typing-extensions", Version: "4.12.2"}}},
		{name: "package pypi requirement no name", in: Args{Package: "pypi:==2.31.0"}, err: "holds a version operator"},
		{name: "package npm without @", in: Args{Package: "npm:lodash==4.17.20"}, err: "want npm:NAME@VERSION or npm:NAME@RANGE"},
		{name: "package no ecosystem", in: Args{Package: "lodash"}, err: "want ecosystem:name"},
		{name: "package unknown ecosystem", in: Args{Package: "nosuch:rails"}, err: `unknown ecosystem "nosuch"`},
		{name: "package empty version", in: Args{Package: "npm:lodash@"}, err: "empty version"},
		{name: "package empty name", in: Args{Package: "npm:@1.0.0"}, err: "--package"},
		{name: "package bad scope", in: Args{Package: "pypi:@x/y"}, err: "only npm names have an @scope"},
		{name: "package oci range", in: Args{Package: "oci:alpine@>=3"}, err: "not supported for oci"},
		{name: "package purl range", in: Args{Package: "pkg:npm/lodash@^4"}, err: "--package"},
		{name: "package purl unknown", in: Args{Package: "pkg:nosuch/rails@7"}, err: `unknown purl type "nosuch"`},
		{name: "package purl deb tilde", in: Args{Package: "pkg:deb/debian/curl@1.0~rc1"},
			want: Filter{Package: &PackageMatch{Ecosystem: "deb", Name: "curl", Version: "1.0~rc1"}}},
		{name: "package purl deb relation", in: Args{Package: "pkg:deb/curl@%3E%3D%207.88"}, err: "a purl version is exact"},
		{name: "package purl npm scope without @", in: Args{Package: "pkg:npm/babel/core@7.24.0"},
			want: Filter{Package: &PackageMatch{Ecosystem: "npm", Name: "@babel/core", Version: "7.24.0"}}},
		{name: "package purl pypi namespace", in: Args{Package: "pkg:pypi/org/requests@2.31.0"}, err: "pypi packages have no namespace"},
		{name: "package purl oci", in: Args{Package: "pkg:oci/library/alpine@3.19"},
			want: Filter{Package: &PackageMatch{Ecosystem: "oci", Name: "library/alpine", Version: "3.19"}}},
		{name: "package purl oci digest, as the record spells it", in: Args{Package: "pkg:oci/library/alpine@sha256%3A0123?repository_url=127.0.0.1:5000"},
			want: Filter{Package: &PackageMatch{Ecosystem: "oci", Name: "library/alpine", Version: "sha256:0123"}}},
		{name: "package oci tag", in: Args{Package: "oci:library/alpine@3.19"},
			want: Filter{Package: &PackageMatch{Ecosystem: "oci", Name: "library/alpine", Version: "3.19"}}},
		{name: "package spec with @", in: Args{Package: "npm:x@npm:y@1"}, err: "bad npm version range"},
		{name: "reason", in: Args{Reason: "oom"}, want: Filter{Reason: "oom"}},
		{name: "reason bad", in: Args{Reason: "OOM!"}, err: "--reason"},
		{name: "pid", in: Args{Pid: "4242"}, want: Filter{Pid: 4242}},
		{name: "pid zero", in: Args{Pid: "0"}, err: "--pid"},
		{name: "pid text", in: Args{Pid: "abc"}, err: "--pid"},
		{name: "pid overflow", in: Args{Pid: "99999999999"}, err: "--pid"},
		{name: "limit", in: Args{Limit: "10"}, want: Filter{Limit: 10}},
		{name: "limit negative", in: Args{Limit: "-1"}, err: "--limit"},
		{name: "path and domain", in: Args{Path: "/etc", Domain: "example.com"}, err: "--path and --domain select different"},
		{name: "path with net kind", in: Args{Path: "/etc", Kind: "net."}, err: "which --kind excludes"},
		{name: "path with file kind", in: Args{Path: "/etc", Kind: "file.read"},
			want: Filter{Path: &PathMatch{Pattern: "/etc"}, Kinds: []Kind{{Name: "file.read"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in, now)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrBadFilter) {
					t.Fatalf("Parse(%+v) error = %v, want one containing %q wrapping ErrBadFilter", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%+v) error = %v, want nil", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestPathMatch(t *testing.T) {
	tests := []struct {
		pattern string
		path    string
		want    bool
	}{
		{"/etc/ssh", "/etc/ssh", true},
		{"/etc/ssh", "/etc/ssh/sshd_config", true},
		{"/etc/ssh", "/etc/sshd", false},
		{"/etc/ssh", "/etc/ssh_config", false},
		{"/etc/ssh/", "/etc/ssh/moduli", true},
		{"/", "/anything/at/all", true},
		{"/", "relative", false},
		{"/home/*/.ssh/id_*", "/home/agent/.ssh/id_rsa", true},
		{"/home/*/.ssh/id_*", "/home/a/b/.ssh/id_rsa", false},
		{"/home/**/id_rsa", "/home/a/b/.ssh/id_rsa", true},
		{"/home/**/id_rsa", "/home/id_rsa", true},
		{"**/.env", "/srv/app/.env", true},
		{"**/.env", ".env", true},
		{"**/.env", "/srv/app/.envrc", false},
		{"/tmp/**", "/tmp/x/y", true},
		{"/tmp/**", "/tmpx", false},
		{"/tmp/f?o", "/tmp/foo", true},
		{"/tmp/f?o", "/tmp/f/o", false},
		{"/tmp/[ab].txt", "/tmp/a.txt", true},
		{"/tmp/[ab].txt", "/tmp/c.txt", false},
		{"/tmp/[!ab].txt", "/tmp/c.txt", true},
		{"/tmp/[!ab].txt", "/tmp/a.txt", false},
		{"/tmp/[!a]x", "/tmp//x", false},
		{"/tmp/[a-c]", "/tmp/b", true},
		{"/tmp/[a-c]", "/tmp/d", false},
		{`/tmp/\*`, "/tmp/*", true},
		{`/tmp/\*`, "/tmp/x", false},
		{"/tmp/a.b*", "/tmp/aXb", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.path, func(t *testing.T) {
			p, err := ParsePath(tt.pattern)
			if err != nil {
				t.Fatalf("ParsePath(%q) error = %v", tt.pattern, err)
			}
			if got := p.Match(tt.path); got != tt.want {
				t.Errorf("ParsePath(%q).Match(%q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
			}
			// A matching path must lie in one of the candidate ranges.
			if tt.want && !inRanges(p.Ranges(), tt.path) {
				t.Errorf("ParsePath(%q).Ranges() = %+v, want one holding %q", tt.pattern, p.Ranges(), tt.path)
			}
		})
	}
}

func inRanges(rs []Range, s string) bool {
	for _, r := range rs {
		if r.Exact && s == r.Lo || !r.Exact && s >= r.Lo && (r.Hi == "" || s < r.Hi) {
			return true
		}
	}
	return false
}

func TestDomainMatch(t *testing.T) {
	tests := []struct {
		pattern, domain string
		want            bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "EXAMPLE.com.", true},
		{"example.com", "www.example.com", false},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "example.com.evil.net", false},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" "+tt.domain, func(t *testing.T) {
			d, err := ParseDomain(tt.pattern)
			if err != nil {
				t.Fatalf("ParseDomain(%q) error = %v", tt.pattern, err)
			}
			if got := d.Match(tt.domain); got != tt.want {
				t.Errorf("ParseDomain(%q).Match(%q) = %v, want %v", tt.pattern, tt.domain, got, tt.want)
			}
			rev := ReverseDomain(NormalizeDomain(tt.domain))
			if got := inRanges([]Range{d.Range()}, rev); got != tt.want {
				t.Errorf("ParseDomain(%q).Range() holds %q = %v, want %v", tt.pattern, rev, got, tt.want)
			}
		})
	}
}

func TestKindMatch(t *testing.T) {
	ks, err := ParseKinds("file.,net.connect")
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]bool{"file.read": true, "file.write": true, "net.connect": true, "net.dns": false, "filex.read": false} {
		if got := MatchKinds(ks, kind); got != want {
			t.Errorf("MatchKinds(file.,net.connect; %q) = %v, want %v", kind, got, want)
		}
	}
}

func TestPackageRange(t *testing.T) {
	tests := []struct {
		spec    string
		version string
		want    bool
	}{
		{"npm:lodash@^4.17.0", "4.17.0", true},
		{"npm:lodash@^4.17.0", "4.17.21", true},
		{"npm:lodash@^4.17.0", "4.16.9", false},
		{"npm:lodash@^4.17.0", "5.0.0", false},
		{"npm:lodash@>=4.17.5 <4.17.20", "4.17.20", false},
		{"npm:lodash@>=4.17.5 <4.17.20", "4.17.19", true},
		{"npm:lodash@>=4.17.5 <4.17.20", "4.17.5", true},
		{"npm:lodash@>=4.17.5 <4.17.20", "4.17.4", false},
		{"npm:lodash@4.17", "4.17.9", true},
		{"npm:lodash@4.17", "4.18.0", false},
		{"npm:lodash@^4.17.0", "not-a-version", false},
		{"deb:curl@>= 7.88.1-10", "7.88.1-10+deb12u5", true},
		{"deb:curl@>= 7.88.1-10", "7.88.1-9", false},
		{"deb:curl@<< 7.88.1-10", "7.88.1-10", false},
		{"npm:lodash@4.17.20", "4.17.20", true},
		{"npm:lodash@4.17.20", "4.17.2", false},
		{"npm:lodash", "0.0.1", true},
		{"pypi:requests@>=2,<3", "2.0", true},
		{"pypi:requests@>=2,<3", "2.31.0", true},
		{"pypi:requests@>=2,<3", "3.0", false},
		{"pypi:requests@>=2,<3", "1.9.9", false},
		{"pypi:requests@~=2.31", "2.32.3", true},
		// PEP 440 specifiers, after @ or as pip takes them.
		{"pypi:requests@==2.31", "2.31.0", true},
		{"pypi:requests==2.31.0", "2.31.0", true},
		{"pypi:requests==2.31", "2.31.0", true},
		{"pypi:requests==2.31.0", "2.31.1", false},
		{"pypi:requests==2.*", "2.5.1", true},
		{"pypi:requests==2.*", "3.0", false},
		{"pypi:requests!=2.31.0", "2.31.0", false},
		{"pypi:requests!=2.31.0", "2.32.0", true},
		{"pypi:requests<3", "2.99", true},
		{"pypi:requests<3", "3.0", false},
		{"pypi:requests<=2.31.0", "2.31.0", true},
		{"pypi:requests<=2.31.0", "2.31.1", false},
		{"pypi:requests>2", "2.0", false},
		{"pypi:requests>2", "2.1", true},
		{"pypi:requests>=2", "2.0", true},
		{"pypi:requests>=2", "1.9", false},
		{"pypi:requests~=2.31", "2.32.3", true},
		{"pypi:requests~=2.31", "3.0", false},
		{"pypi:requests===2.31.0", "2.31.0", true},
		{"pypi:requests===2.31.0", "2.31", false},
		{"pypi:requests>=2,<3", "2.5", true},
		{"pypi:requests>=2,<3", "3.0", false},
		{"pypi:requests >= 2, < 3", "2.5", true},
		{"pypi:requests>=2,!=2.31.0,<3", "2.31.0", false},
		{"pypi:requests>=2,!=2.31.0,<3", "2.32.0", true},
		{"PyPI:Typing_Extensions==4.12.2", "4.12.2", true},
		{"cargo:serde@^1.0.100", "1.0.200", true},
		{"cargo:serde@^1.0.100", "1.0.99", false},
		{"cargo:serde@~1.0", "1.1.0", false},
	}
	for _, tt := range tests {
		t.Run(tt.spec+" "+tt.version, func(t *testing.T) {
			p, err := ParsePackage(tt.spec)
			if err != nil {
				t.Fatalf("ParsePackage(%q) error = %v", tt.spec, err)
			}
			if got := p.MatchVersion(tt.version); got != tt.want {
				t.Errorf("ParsePackage(%q).MatchVersion(%q) = %v, want %v", tt.spec, tt.version, got, tt.want)
			}
		})
	}
}

func TestPackageRangeErrors(t *testing.T) {
	for _, spec := range []string{"npm:lodash@^^4", "deb:curl@>=> 1",
		"pypi:requests=2.31", "pypi:requests==>2", "pypi:requests==2.31.x", "pypi:requests@==2.31.x",
		"pypi:requests>=2,<3x", "pypi:requests~=2"} {
		if _, err := ParsePackage(spec); err == nil || !strings.Contains(err.Error(), "version range") {
			t.Errorf("ParsePackage(%q) error = %v, want a bad version range error", spec, err)
		}
	}
}

// TestPackageRequirementName: a PyPI requirement as pip takes it names the
// package before its first operator, and the name is normalized as ever.
func TestPackageRequirementName(t *testing.T) {
	tests := []struct {
		name, spec, wantName, wantRange string
	}{
		{name: "equal", spec: "pypi:requests==2.31.0", wantName: "requests", wantRange: "==2.31.0"},
		{name: "set", spec: "pypi:requests>=2,<3", wantName: "requests", wantRange: ">=2,<3"},
		{name: "spaces", spec: "pypi:requests >= 2", wantName: "requests", wantRange: ">= 2"},
		{name: "compatible", spec: "pypi:Typing_Extensions~=4.12", wantName: "typing-extensions", wantRange: "~=4.12"},
		{name: "not equal", spec: "pypi:requests!=2.31.0", wantName: "requests", wantRange: "!=2.31.0"},
		{name: "arbitrary", spec: "pypi:requests===2.31.0", wantName: "requests", wantRange: "===2.31.0"},
		{name: "extras", spec: "pypi:requests[socks,security]>=2", wantName: "requests", wantRange: ">=2"},
		{name: "extras any version", spec: "pypi:requests[socks]", wantName: "requests"},
		{name: "extras with @", spec: "pypi:requests[socks]@<3", wantName: "requests", wantRange: "<3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePackage(tt.spec)
			if err != nil {
				t.Fatalf("ParsePackage(%q) error = %v", tt.spec, err)
			}
			if p.Ecosystem != "pypi" || p.Name != tt.wantName || p.Range != tt.wantRange || p.Version != "" {
				t.Errorf("ParsePackage(%q) = %s:%s range %q version %q, want pypi:%s range %q", tt.spec,
					p.Ecosystem, p.Name, p.Range, p.Version, tt.wantName, tt.wantRange)
			}
		})
	}
}

// TestPackageRecordPurl: --package takes a record's own purl (the one
// purl.Of writes into pkg.fetch and pkg.install) and matches its name and
// version, for every ecosystem.
func TestPackageRecordPurl(t *testing.T) {
	for _, c := range []struct{ eco, name, version string }{
		{"npm", "@babel/core", "7.24.0"},
		{"pypi", "requests", "2.31.0"},
		{"cargo", "serde", "1.0.200"},
		{"deb", "curl", "7.88.1-10+deb12u5"},
		{"oci", "library/alpine", "sha256:0123abcd"},
		{"oci", "org/team/image", "v1"},
	} {
		f, err := Parse(Args{Package: purl.Of(c.eco, c.name, c.version)}, time.Now())
		if err != nil {
			t.Errorf("%s: %v", purl.Of(c.eco, c.name, c.version), err)
			continue
		}
		if p := f.Package; p.Ecosystem != c.eco || p.Name != c.name || p.Version != c.version {
			t.Errorf("%s: matches %s, want %s:%s@%s", purl.Of(c.eco, c.name, c.version), p, c.eco, c.name, c.version)
		}
	}
}
