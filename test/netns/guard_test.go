package netns

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// foreignOK names the test files and scripts that may name an address
// that is not loopback, unspecified or documentation (RFC 5737, RFC 3849),
// and why. A file that dials or sends to such an address does it only
// from a dialer that runs in a namespace of New's and calls Check first.
// Every other file naming one is data that is never dialed, and says so
// here.
var foreignOK = map[string]string{
	"collector/net_linux_test.go":                 "dials only from helpers that run in a namespace of New's and call Check",
	"test/e2e/egress_linux_test.go":               "dials 0.1.2.3 only from the egressdial helper, which runs in a namespace of New's and calls Check",
	"kernel/cgroup/cgroup_test.go":                "data: /proc/self/cgroup lines such as 0::a, not addresses",
	"scripts/demo.sh":                             "its agent dials 169.254.169.254 only after checking that the address has no route (the demo's blackhole rule for the sessions' uids)",
	"test/netns/guard_test.go":                    "data: the guard's own cases",
	"policies/sigma/bench_test.go":                "data: addresses in events a rule is matched against, never dialed",
	"policies/sigma/correlation_test.go":          "data: addresses in events a rule is matched against, never dialed",
	"policies/sigma/detection_test.go":            "data: cidr modifier cases, never dialed",
	"policies/sigma/fuzz_test.go":                 "data: fuzz seeds, never dialed",
	"policies/sigma/helpers_test.go":              "data: addresses in events a rule is matched against, never dialed",
	"policies/sigma/load_test.go":                 "data: rule values, never dialed",
	"registry-mirror/fetch/redirect_fuzz_test.go": "data: redirect Locations judged by the policy, never followed",
	"policies/egress_table_test.go":               "data: egress table entries, never dialed",
	"policies/engine_test.go":                     "data: policy decisions, never dialed",
	"record/event/examples_test.go":               "data: example events",
	"record/event/redact_bench_test.go":           "data: text to redact",
	"record/event/redact_test.go":                 "data: text to redact",
	"record/ingest/server/attrib_linux_test.go":   "data: a client address in a forged event",
	"record/journal/helpers_test.go":              "data: generated events",
	"resolver/npm/gen_test.go":                    "data: a four-part version string",
	"test/bench/journal_test.go":                  "data: generated events",
	"test/bench/policy_linux_test.go":             "data: an address the policy decides on",
}

// addrRE finds IPv4 literals, and IPv6 literals with a "::" or all eight
// groups.
var addrRE = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b|[0-9A-Fa-f:.]*::[0-9A-Fa-f:.]*|\b(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}\b`)

// documentation are the address ranges reserved for documentation.
var documentation = []netip.Prefix{
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// foreign reports whether a is an address a test must not send to except
// from a namespace of New's, and that only foreignOK files may name.
func foreign(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return false
	}
	for _, p := range documentation {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// TestNoForeignAddresses fails when a test file or a script names an
// address off this machine outside the files listed in foreignOK: packets
// go only to loopback, into a namespace the test made, or to the package
// registries through their real clients (test/README.md).
func TestNoForeignAddresses(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "--cached", "--others", "--exclude-standard",
		"*_test.go", "*.sh", ".ci/*").Output()
	if err != nil {
		t.Skipf("listing the repository's files with git: %v", err)
	}
	files := strings.Fields(string(out))
	if !slices.Contains(files, "test/netns/guard_test.go") {
		t.Fatalf("git listed %d files, not this one: wrong directory?", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			t.Fatal(err)
		}
		var found []string
		for _, loc := range addrRE.FindAllIndex(b, -1) {
			if !standsAlone(b, loc[0], loc[1]) {
				continue // part of a word: "Debug::NoLocking" holds "deb::"
			}
			a, err := netip.ParseAddr(strings.Trim(string(b[loc[0]:loc[1]]), ":."))
			if err == nil && foreign(a) && !slices.Contains(found, a.String()) {
				found = append(found, a.String())
			}
		}
		if len(found) == 0 {
			continue
		}
		seen[f] = true
		if _, ok := foreignOK[f]; !ok {
			t.Errorf("%s names %s: a test sends only to loopback, into a namespace it made (test/netns), or to the package registries through their real clients; use a documentation address, or dial through netns.New and list the file in foreignOK with the reason", f, strings.Join(found, ", "))
		}
	}
	for f := range foreignOK {
		if !seen[f] {
			t.Errorf("foreignOK lists %s, which names no foreign address now: take it out", f)
		}
	}
}

// standsAlone reports whether b[i:j] is not part of a longer word: no
// letter, digit or underscore touches it on either side.
func standsAlone(b []byte, i, j int) bool {
	word := func(c byte) bool { return c == '_' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' }
	return (i == 0 || !word(b[i-1])) && (j == len(b) || !word(b[j]))
}

func TestStandsAlone(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"Debug::NoLocking", nil},
		{`"2606:4700::1"`, []string{"2606:4700::1"}},
		{"dial 8.8.8.8:53 now", []string{"8.8.8.8"}},
		{"v1.2.3.4x", nil},
	} {
		var got []string
		for _, loc := range addrRE.FindAllStringIndex(tt.in, -1) {
			if standsAlone([]byte(tt.in), loc[0], loc[1]) {
				got = append(got, strings.Trim(tt.in[loc[0]:loc[1]], ":."))
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("addresses in %q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestForeign(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false}, {"::ffff:127.0.0.1", false},
		{"0.0.0.0", false}, {"::", false}, {"192.0.2.53", false}, {"2001:db8::53", false}, {"203.0.113.7", false},
		{"8.8.8.8", true}, {"10.1.2.3", true}, {"192.168.1.1", true}, {"::2", true}, {"2606:4700::1", true},
		{"::ffff:10.1.2.3", true}, {"169.254.169.254", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := foreign(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("foreign(%s) = %v, want %v", tt.addr, got, tt.want)
			}
		})
	}
}
