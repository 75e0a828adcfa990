package event

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// kvPattern and flagPattern are the regular expressions that redactKV and
// redactFlagSpace implement by hand; the baseline uses them, and
// TestScannersMatchPatterns checks that both agree.
var (
	kvPattern   = regexp.MustCompile(`(?i)([A-Za-z0-9_.-]*?(?:` + secretWords + `))(["']?[ \t]*[=:][ \t]*)(` + maskedValue + `|"(?:[^"\\]|\\.)*"|'[^']*'|[^\s"',;&:=][^\s"',;&]*)`)
	flagPattern = regexp.MustCompile(`(?i)((?:^|[\s"'])--?[A-Za-z0-9_.-]*?(?:` + secretWords + `|bearer))([ \t]+)(` + maskedValue + `|"[^"]*"|'[^']*'|[^\s"'\-][^\s"']*)`)
)

// naiveRedact is the baseline for BenchmarkRedact: the same rules applied to
// every string with no pre-check and no per-rule guard.
func naiveRedact(s string) string {
	s = rePEM().ReplaceAllString(s, "-----BEGIN ${1}PRIVATE KEY-----"+Mask+"-----END ${1}PRIVATE KEY-----")
	for _, r := range tokenRules {
		s = r.re().ReplaceAllString(s, r.repl)
	}
	s = reURL().ReplaceAllStringFunc(s, redactURL)
	s = replaceGroup(s, reAuthHeader(), 4)
	s = replaceGroup(s, reCookie(), 3)
	s = replaceGroup(s, kvPattern, 3)
	s = replaceGroup(s, reBearer(), 3)
	return replaceGroup(s, flagPattern, 3)
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

// BenchmarkRedactRatio interleaves Redact and the naive baseline in small
// batches, so that both see the same machine load, and reports the fastest
// batch of each and their ratio (naive-x: how many times faster Redact is).
// On a shared, loaded machine the fastest batch is far steadier than a mean,
// which every preemption inflates.
func BenchmarkRedactRatio(b *testing.B) {
	const batch = 10
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			minRedact, minNaive := time.Duration(1<<62), time.Duration(1<<62)
			for b.Loop() {
				t0 := time.Now()
				for range batch {
					for _, s := range in.in {
						_ = Redact(s)
					}
				}
				t1 := time.Now()
				for range batch {
					for _, s := range in.in {
						_ = naiveRedact(s)
					}
				}
				minRedact = min(minRedact, t1.Sub(t0))
				minNaive = min(minNaive, time.Since(t1))
			}
			b.ReportMetric(float64(minNaive)/float64(minRedact), "naive-x")
			b.ReportMetric(float64(minRedact.Nanoseconds())/batch, "redact-ns/op")
			b.ReportMetric(float64(minNaive.Nanoseconds())/batch, "naive-ns/op")
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

// scannerInputs exercise the edges of the key=value and flag grammars.
var scannerInputs = []string{
	"DB_PASSWORD=hunter2", "token::Lexer", "if token == nil", "token=token=x", "a=b token: c",
	`"password": "hun\"ter2", "n": 1`, `password='a b' x`, `token" = x`, `token "=x`, "token=  ", "token= ,x",
	"password=***abc", "password=ghp_***@host", "token=\"unterminated", "token='unterminated",
	"--password hunter2", "-token abc", "---token x", "- token x", "x --password -y", `"--token "a"--password x`,
	"--token 'a b' --secret \"c d\"", "--auth\tx", "--password\n x", "PGPASSWORD=x psql --password y",
	"key=\"a\\\nb\"", "token=\"a\\\"b\" c", "x_auth:=y", "secret:\"\"", "AUTH =  'q' ", "--bearer tok --token",
	"max_tokens=5 author: x PWD=/h", "token=a&secret=b;password=c,auth=d", "token=é", "--token é",
}

func TestScannersMatchPatterns(t *testing.T) {
	for _, s := range scannerInputs {
		if got, want := redactKV(s), replaceGroup(s, kvPattern, 3); got != want {
			t.Errorf("redactKV(%q) = %q, want %q (as kvPattern)", s, got, want)
		}
		if got, want := redactFlagSpace(s), replaceGroup(s, flagPattern, 3); got != want {
			t.Errorf("redactFlagSpace(%q) = %q, want %q (as flagPattern)", s, got, want)
		}
	}
}

// FuzzScannersMatchPatterns checks the hand-written scanners against the
// regular expressions they implement. Input is folded to ASCII first:
// regexp's case folding also matches the Kelvin sign and the long s, which
// the scanners (and the ASCII pre-check before them) deliberately ignore.
func FuzzScannersMatchPatterns(f *testing.F) {
	for _, s := range scannerInputs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		for i, c := range b {
			if c >= 0x80 {
				b[i] = 'x'
			}
		}
		s = string(b)
		if got, want := redactKV(s), replaceGroup(s, kvPattern, 3); got != want {
			t.Fatalf("redactKV(%q) = %q, want %q (as kvPattern)", s, got, want)
		}
		if got, want := redactFlagSpace(s), replaceGroup(s, flagPattern, 3); got != want {
			t.Fatalf("redactFlagSpace(%q) = %q, want %q (as flagPattern)", s, got, want)
		}
	})
}
