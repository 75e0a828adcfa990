package event

import (
	"strings"
	"testing"
)

// naiveRedact is the baseline for BenchmarkRedact: the same rules applied to
// every string with no pre-check and no per-rule guard.
func naiveRedact(s string) string {
	s = rePEM.ReplaceAllString(s, "-----BEGIN ${1}PRIVATE KEY-----"+Mask+"-----END ${1}PRIVATE KEY-----")
	for _, r := range tokenRules {
		s = r.re.ReplaceAllString(s, r.repl)
	}
	s = reURL.ReplaceAllStringFunc(s, redactURL)
	s = replaceGroup(s, reAuthHeader, 4)
	s = replaceGroup(s, reCookie, 3)
	s = replaceGroup(s, reKV, 3)
	s = replaceGroup(s, reBearer, 3)
	return replaceGroup(s, reFlagSpace, 3)
}

var benchInputs = []struct {
	name string
	in   []string
}{
	{"argv-words", []string{"npm", "install", "lodash@^4.17.0", "typescript@5.4.5", "/usr/bin/node", "requests"}},
	{"argv-flags", []string{"pip", "install", "requests>=2,<3", "--index-url", "https://pypi.org/simple/", "--no-cache-dir", "apt-get=2.6.1"}},
	{"summary-clean", []string{strings.Repeat("added 214 packages, and audited 215 packages in 3s; found 0 vulnerabilities. run: npm fund --json\n", 10)}},
	{"summary-secrets", []string{strings.Repeat("export GITHUB_TOKEN=ghp_"+strings.Repeat("aB3", 12)+"; curl -H 'Authorization: Bearer abcdefghijkl' https://bob:pw@x.example/?token=1\n", 5)}},
}

// BenchmarkRedact compares Redact with the naive baseline on the same inputs
// in the same run. Ratios go to docs/benchmarks.md.
func BenchmarkRedact(b *testing.B) {
	for _, in := range benchInputs {
		size := 0
		for _, s := range in.in {
			size += len(s)
		}
		b.Run(in.name+"/redact", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range in.in {
					_ = Redact(s)
				}
			}
		})
		b.Run(in.name+"/naive", func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range in.in {
					_ = naiveRedact(s)
				}
			}
		})
	}
}

func BenchmarkRedactArgv(b *testing.B) {
	argv := []string{"npm", "install", "lodash@^4.17.0", "--save-dev", "typescript@5.4.5", "--registry", "http://10.88.0.1:4873/npm/"}
	b.ReportAllocs()
	for b.Loop() {
		_ = RedactArgv(argv)
	}
}

func TestNaiveRedactAgrees(t *testing.T) {
	// The baseline must do the same work: on these inputs it gives the same
	// result as Redact.
	for _, in := range benchInputs {
		for _, s := range in.in {
			if got, want := naiveRedact(s), Redact(s); got != want {
				t.Errorf("naiveRedact(%.40q) = %.80q, want %.80q", s, got, want)
			}
		}
	}
}
