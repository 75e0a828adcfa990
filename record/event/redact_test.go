package event_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// Realistic-looking but fake credentials, built so that no scanner mistakes
// this file for a leak.
var (
	ghToken    = "ghp_" + strings.Repeat("aB3", 12)
	ghoToken   = "gho_" + strings.Repeat("Zy9", 12)
	patToken   = "github_pat_11ABCDEFG0" + strings.Repeat("x", 12) + "_" + strings.Repeat("Y7", 29)
	npmToken   = "npm_" + strings.Repeat("q1W", 12)
	pypiToken  = "pypi-AgEIcHlwaS5vcmc" + strings.Repeat("CJDk5Yz", 8)
	slackToken = "xoxb-" + "123456789012-1234567890123-" + strings.Repeat("Ab", 12)
	awsKeyID   = "AKIA" + "IOSFODNN7EXAMPLE"
	awsTempID  = "ASIA" + "Y34FZKBOKMUTVV7A"
	awsSecret  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
	jwt        = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ" + "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	pem        = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98\nq3Y=\n-----END RSA PRIVATE KEY-----"
	anthropic  = "sk-ant-api03-" + strings.Repeat("Xy_9", 10)
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Left alone.
		{"empty", "", ""},
		{"npm spec", "lodash@^4.17.0", "lodash@^4.17.0"},
		{"npm command", "npm install lodash@^4.17.0", "npm install lodash@^4.17.0"},
		{"pip spec", "pip install 'requests>=2'", "pip install 'requests>=2'"},
		{"apt pin", "apt-get install -y curl=7.88.1-10+deb12u5", "apt-get install -y curl=7.88.1-10+deb12u5"},
		{"url without credentials", "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz", "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz"},
		{"url with query", "https://pypi.org/simple/requests/?format=json&page=2", "https://pypi.org/simple/requests/?format=json&page=2"},
		{"scp-like git", "git@github.com:sandtrail/sandtrail.git", "git@github.com:sandtrail/sandtrail.git"},
		{"ssh user", "ssh://git@github.com/sandtrail/sandtrail", "ssh://git@github.com/sandtrail/sandtrail"},
		{"short url user", "https://alice@bitbucket.org/acme/app.git", "https://alice@bitbucket.org/acme/app.git"},
		{"max_tokens", `{"max_tokens": 1024, "input_tokens": 12}`, `{"max_tokens": 1024, "input_tokens": 12}`},
		{"author", "author: Jane Doe", "author: Jane Doe"},
		{"PWD is the working directory", "PWD=/home/agent", "PWD=/home/agent"},
		{"rust path", "use crate::token::Lexer;", "use crate::token::Lexer;"},
		{"comparison", "if token == nil {", "if token == nil {"},
		{"prose", "the token is valid and the password policy is strict", "the token is valid and the password policy is strict"},
		{"password-stdin flag", "docker login --password-stdin -u bob", "docker login --password-stdin -u bob"},
		{"hash", "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==", "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg=="},
		{"npm config env", "npm_config_registry=http://10.88.0.1:4873/", "npm_config_registry=http://10.88.0.1:4873/"},
		{"short gh-like", "ghp_short", "ghp_short"},
		{"AKIA too short", "AKIA1234", "AKIA1234"},
		{"already masked", "password=*** ghp_*** AKIA*** Authorization: Bearer ***", "password=*** ghp_*** AKIA*** Authorization: Bearer ***"},

		// Key-value pairs.
		{"env password", "DB_PASSWORD=hunter2", "DB_PASSWORD=***"},
		{"env pgpassword", "PGPASSWORD=hunter2 psql", "PGPASSWORD=*** psql"},
		{"env token", "CI_JOB_TOKEN=abc123 make", "CI_JOB_TOKEN=*** make"},
		{"env secret", "CLIENT_SECRET='s3 cr3t'", "CLIENT_SECRET='***'"},
		{"env api key", "OPENAI_API_KEY=abc123def", "OPENAI_API_KEY=***"},
		{"flag equals", "--password=hunter2", "--password=***"},
		{"flag equals token", "--token=abc", "--token=***"},
		{"flag api-key", "--api-key=abc", "--api-key=***"},
		{"flag secret", "--secret=abc", "--secret=***"},
		{"flag auth", "--auth=user:pw", "--auth=***"},
		{"flag space", "mysql --password hunter2 -h db", "mysql --password *** -h db"},
		{"flag space token", "gh auth login --token abc123", "gh auth login --token ***"},
		{"yaml", "password: hunter2\nuser: bob", "password: ***\nuser: bob"},
		{"json", `{"user":"bob","password":"hun\"ter2","n":1}`, `{"user":"bob","password":"***","n":1}`},
		{"npmrc authToken", "//registry.npmjs.org/:_authToken=abc123", "//registry.npmjs.org/:_authToken=***"},
		{"npmrc auth", "_auth=Ym9iOnB3", "_auth=***"},
		{"aws secret ini", "aws_secret_access_key = " + awsSecret, "aws_secret_access_key = ***"},
		{"aws secret env", "AWS_SECRET_ACCESS_KEY=" + awsSecret, "AWS_SECRET_ACCESS_KEY=***"},
		{"header api key", "X-Api-Key: abc123", "X-Api-Key: ***"},
		{"gitlab private token", "PRIVATE-TOKEN: glpat-abc", "PRIVATE-TOKEN: ***"},

		// Headers.
		{"authorization bearer", "Authorization: Bearer abc.def.ghi", "Authorization: Bearer ***"},
		{"authorization basic", "authorization: Basic Ym9iOnB3", "authorization: Basic ***"},
		{"authorization token", "Authorization: token " + ghToken, "Authorization: token ghp_***"},
		{"authorization no scheme", "Authorization: abc123", "Authorization: ***"},
		{"proxy authorization", "Proxy-Authorization: Basic Ym9iOnB3", "Proxy-Authorization: Basic ***"},
		{"curl header", `curl -H "Authorization: Bearer abc123" https://api.example.com`, `curl -H "Authorization: Bearer ***" https://api.example.com`},
		{"git extraheader", "http.extraHeader=Authorization: Basic Ym9iOnB3", "http.extraHeader=Authorization: Basic ***"},
		{"bare bearer", "sent Bearer abcdefghijklmnop", "sent Bearer ***"},
		{"cookie", "Cookie: session=abc; csrftoken=def", "Cookie: ***"},

		// URLs.
		{"url password", "https://bob:hunter2@example.com/simple/", "https://bob:***@example.com/simple/"},
		{"url password with at", "https://bob:hun@ter2@example.com/", "https://bob:***@example.com/"},
		{"url token userinfo", "https://" + ghToken + "@github.com/acme/app.git", "https://ghp_***@github.com/acme/app.git"},
		{"url long opaque userinfo", "https://0123456789abcdef0123456789@example.com/", "https://***@example.com/"},
		{"url x-access-token", "https://x-access-token:" + ghToken + "@github.com/acme/app", "https://x-access-token:ghp_***@github.com/acme/app"},
		{"url query token", "https://example.com/dl?access_token=abc&v=2", "https://example.com/dl?access_token=***&v=2"},
		{"url query signature", "https://s3.amazonaws.com/b/k?X-Amz-Credential=AKIA/x&X-Amz-Signature=abcdef&X-Amz-Expires=60", "https://s3.amazonaws.com/b/k?X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Expires=60"},
		{"url fragment token", "https://app.example.com/cb#access_token=abc&token_type=bearer", "https://app.example.com/cb#access_token=***&token_type=bearer"},
		{"url in text", "pip install --index-url https://bob:pw@pypi.acme.example/simple/ requests", "pip install --index-url https://bob:***@pypi.acme.example/simple/ requests"},
		{"slack webhook", "curl -d x https://hooks.slack.com/services/T0000/B0000/XXXXXXXX", "curl -d x https://hooks.slack.com/services/***"},

		// Known token formats, wherever they are.
		{"aws key id", "key " + awsKeyID + " in use", "key AKIA*** in use"},
		{"aws temp key id", awsTempID, "ASIA***"},
		{"github classic", "token " + ghToken + ".", "token ghp_***."},
		{"github oauth", ghoToken, "gho_***"},
		{"github fine-grained", "GH=" + patToken, "GH=github_pat_***"},
		{"github in env", "GITHUB_TOKEN=" + ghToken, "GITHUB_TOKEN=ghp_***"},
		{"npm", "echo " + npmToken, "echo npm_***"},
		{"pypi", "TWINE_PASSWORD=" + pypiToken, "TWINE_PASSWORD=pypi-***"},
		{"pypi bare", "upload with " + pypiToken, "upload with pypi-***"},
		{"slack", "xoxb token " + slackToken, "xoxb token xoxb-***"},
		{"anthropic", "key=" + anthropic, "key=sk-ant-***"},
		{"openai legacy", "OPENAI=sk-" + strings.Repeat("T3BlbkFJ", 6), "OPENAI=sk-***"},
		{"kebab-case sk- word", "sk-learn-is-not-a-key-but-long-enough", "sk-learn-is-not-a-key-but-long-enough"},
		{"jwt", "id_token " + jwt + " ok", "id_token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.*** ok"},
		{"pem", "key:\n" + pem + "\ndone", "key:\n-----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY-----\ndone"},
		{"pem truncated", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "-----BEGIN OPENSSH PRIVATE KEY-----***-----END OPENSSH PRIVATE KEY-----"},
		{"pem plain", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"},
		{"public key kept", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := event.Redact(tt.in)
			if got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := event.Redact(got); again != got {
				t.Errorf("Redact(Redact(%q)) = %q, want %q", tt.in, again, got)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain", "https://registry.npmjs.org/lodash", "https://registry.npmjs.org/lodash"},
		{"not re-encoded", "https://example.com/a%2Fb?q=a+b&x=%zz#frag", "https://example.com/a%2Fb?q=a+b&x=%zz#frag"},
		{"user and password", "https://bob:hunter2@pypi.acme.example/simple/", "https://bob:***@pypi.acme.example/simple/"},
		{"empty password", "https://bob:@example.com/", "https://bob:@example.com/"},
		{"encoded password", "https://bob:p%40ss@example.com", "https://bob:***@example.com"},
		{"no path", "https://bob:pw@example.com", "https://bob:***@example.com"},
		{"token userinfo", "https://" + npmToken + "@registry.example.com/", "https://npm_***@registry.example.com/"},
		{"query", "https://example.com/?token=abc", "https://example.com/?token=***"},
		{"query api_key", "https://example.com/v1?api_key=abc&format=json", "https://example.com/v1?api_key=***&format=json"},
		{"query key", "https://maps.example.com/api?key=abc123&q=x", "https://maps.example.com/api?key=***&q=x"},
		{"query sig", "https://acct.blob.core.windows.net/c/b?sv=2022&sig=abc%3D", "https://acct.blob.core.windows.net/c/b?sv=2022&sig=***"},
		{"query password", "ftp://example.com/?password=x", "ftp://example.com/?password=***"},
		{"key-value in the path", "https://example.com/token=abc/x", "https://example.com/token=***"},
		{"query empty value", "https://example.com/?token=&a=1", "https://example.com/?token=&a=1"},
		{"postgres dsn", "postgres://app:s3cret@db:5432/app?sslmode=disable", "postgres://app:***@db:5432/app?sslmode=disable"},
		{"git token in path", "https://github.com/acme/app/archive/" + ghToken + ".tar.gz", "https://github.com/acme/app/archive/ghp_***.tar.gz"},
		{"no scheme", "bob:pw@host", "bob:pw@host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := event.RedactURL(tt.in)
			if got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := event.RedactURL(got); again != got {
				t.Errorf("RedactURL(RedactURL(%q)) = %q, want %q", tt.in, again, got)
			}
		})
	}
}

func TestRedactArgv(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"nil", nil, nil},
		{"empty", []string{}, []string{}},
		{"npm install", []string{"npm", "install", "lodash@^4.17.0"}, []string{"npm", "install", "lodash@^4.17.0"}},
		{"pip install", []string{"pip", "install", "requests>=2", "--index-url", "https://pypi.org/simple/"}, []string{"pip", "install", "requests>=2", "--index-url", "https://pypi.org/simple/"}},
		{"cargo", []string{"cargo", "add", "serde@1", "-p", "app"}, []string{"cargo", "add", "serde@1", "-p", "app"}},
		{"mkdir -p", []string{"mkdir", "-p", "/tmp/x"}, []string{"mkdir", "-p", "/tmp/x"}},
		{"ssh -p is a port", []string{"ssh", "-p", "2222", "host"}, []string{"ssh", "-p", "2222", "host"}},
		{"psql -p is a port", []string{"psql", "-h", "db", "-p", "5432"}, []string{"psql", "-h", "db", "-p", "5432"}},
		{"password equals", []string{"tool", "--password=hunter2"}, []string{"tool", "--password=***"}},
		{"password space", []string{"tool", "--password", "hunter2", "--verbose"}, []string{"tool", "--password", "***", "--verbose"}},
		{"token space", []string{"gh", "auth", "login", "--token", "abc"}, []string{"gh", "auth", "login", "--token", "***"}},
		{"api-key space", []string{"llm", "--api-key", "abc", "hi"}, []string{"llm", "--api-key", "***", "hi"}},
		{"secret space", []string{"vault", "--secret", "abc"}, []string{"vault", "--secret", "***"}},
		{"auth space", []string{"tool", "--auth", "bob:pw"}, []string{"tool", "--auth", "***"}},
		{"single dash token", []string{"tool", "-token", "abc"}, []string{"tool", "-token", "***"}},
		{"prompting flag", []string{"tool", "--password", "--user", "bob"}, []string{"tool", "--password", "--user", "bob"}},
		{"flag at end", []string{"tool", "--password"}, []string{"tool", "--password"}},
		{"no- flag", []string{"npm", "--no-password", "x"}, []string{"npm", "--no-password", "x"}},
		{"password-stdin", []string{"docker", "login", "--password-stdin", "ghcr.io"}, []string{"docker", "login", "--password-stdin", "ghcr.io"}},
		{"env style", []string{"env", "NPM_TOKEN=abc", "AWS_SECRET=x", "HOME=/root", "npm", "publish"}, []string{"env", "NPM_TOKEN=***", "AWS_SECRET=***", "HOME=/root", "npm", "publish"}},
		{"authorization header", []string{"curl", "-H", "Authorization: Bearer abc", "https://api.example.com"}, []string{"curl", "-H", "Authorization: Bearer ***", "https://api.example.com"}},
		{"header equals", []string{"curl", "--header=Authorization: token abc", "https://x"}, []string{"curl", "--header=Authorization: token ***", "https://x"}},
		{"mysql attached", []string{"mysql", "-u", "root", "-phunter2", "app"}, []string{"mysql", "-u", "root", "-p***", "app"}},
		{"mysql prompt keeps database", []string{"mysql", "-u", "root", "-p", "app"}, []string{"mysql", "-u", "root", "-p", "app"}},
		{"mysqldump path", []string{"/usr/bin/mysqldump", "-psecret", "db"}, []string{"/usr/bin/mysqldump", "-p***", "db"}},
		{"mysql long", []string{"mysql", "--password=hunter2"}, []string{"mysql", "--password=***"}},
		{"sshpass", []string{"sshpass", "-p", "hunter2", "ssh", "host"}, []string{"sshpass", "-p", "***", "ssh", "host"}},
		{"sshpass attached", []string{"sshpass", "-phunter2", "ssh", "host"}, []string{"sshpass", "-p***", "ssh", "host"}},
		{"docker login", []string{"docker", "login", "-u", "bob", "-p", "hunter2", "ghcr.io"}, []string{"docker", "login", "-u", "bob", "-p", "***", "ghcr.io"}},
		{"docker run -p is a port", []string{"docker", "run", "-p", "8080:80", "nginx"}, []string{"docker", "run", "-p", "8080:80", "nginx"}},
		{"curl user", []string{"curl", "-u", "bob:hunter2", "https://x"}, []string{"curl", "-u", "bob:***", "https://x"}},
		{"curl user attached", []string{"curl", "-ubob:hunter2", "https://x"}, []string{"curl", "-ubob:***", "https://x"}},
		{"curl user long", []string{"curl", "--user=bob:hunter2", "https://x"}, []string{"curl", "--user=bob:***", "https://x"}},
		{"curl user without password", []string{"curl", "-u", "bob", "https://x"}, []string{"curl", "-u", "bob", "https://x"}},
		{"wget password", []string{"wget", "--http-password=hunter2", "https://x"}, []string{"wget", "--http-password=***", "https://x"}},
		{"redis-cli", []string{"redis-cli", "-a", "hunter2", "ping"}, []string{"redis-cli", "-a", "***", "ping"}},
		{"openssl pass", []string{"openssl", "rsa", "-passin", "pass:hunter2", "-in", "k.pem"}, []string{"openssl", "rsa", "-passin", "pass:***", "-in", "k.pem"}},
		{"openssl env kept", []string{"openssl", "rsa", "-passin", "env:PW"}, []string{"openssl", "rsa", "-passin", "env:PW"}},
		{"url in argv", []string{"git", "clone", "https://x-access-token:" + ghToken + "@github.com/acme/app"}, []string{"git", "clone", "https://x-access-token:ghp_***@github.com/acme/app"}},
		{"token after flag keeps kind", []string{"tool", "--token", ghToken}, []string{"tool", "--token", "ghp_***"}},
		{"bare token", []string{"echo", npmToken}, []string{"echo", "npm_***"}},
		{"npmrc flag", []string{"npm", "--//registry.npmjs.org/:_authToken=abc", "publish"}, []string{"npm", "--//registry.npmjs.org/:_authToken=***", "publish"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got := event.RedactArgv(in)
			if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("RedactArgv(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("RedactArgv(%q) modified its input to %q", tt.in, in)
			}
			if again := event.RedactArgv(got); !slices.Equal(again, got) {
				t.Errorf("RedactArgv(RedactArgv(%q)) = %q, want %q", tt.in, again, got)
			}
		})
	}
}

func TestRedactNoAllocForOrdinaryWords(t *testing.T) {
	words := []string{"install", "lodash@^4.17.0", "/usr/bin/node", "requests", "serde@1"}
	allocs := testing.AllocsPerRun(100, func() {
		for _, w := range words {
			_ = event.Redact(w)
		}
	})
	if allocs != 0 {
		t.Errorf("Redact(ordinary words) allocated %v times per run, want 0", allocs)
	}
}

// leakPatterns are token shapes that must never survive Redact. They are
// written independently of redact.go and are no broader than its rules.
var leakPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`),
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36}`),
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}`),
	regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}`),
	regexp.MustCompile(`\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}`),
	regexp.MustCompile(`\bxox[baprs]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\.eyJ`),
	regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{20,}`),
}

var rePEMBegin = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----`)

// leak returns the first known token shape left in s, or "".
func leak(s string) string {
	for _, re := range leakPatterns {
		if m := re.FindString(s); m != "" {
			return m
		}
	}
	for _, loc := range rePEMBegin.FindAllStringIndex(s, -1) {
		if !strings.HasPrefix(s[loc[1]:], "***-----END ") {
			return s[loc[0]:min(len(s), loc[1]+16)]
		}
	}
	return ""
}

func TestLeakCheckerFindsTokens(t *testing.T) {
	// The fuzz oracle must itself be able to fail.
	for _, tok := range []string{awsKeyID, awsTempID, ghToken, ghoToken, patToken, npmToken, pypiToken, slackToken, jwt, pem, anthropic} {
		if leak("x "+tok+" y") == "" {
			t.Errorf("leak(%q) = \"\", want the token found", tok)
		}
		if l := leak(event.Redact("x " + tok + " y")); l != "" {
			t.Errorf("leak(Redact(%q)) = %q, want \"\"", tok, l)
		}
	}
}

func FuzzRedact(f *testing.F) {
	seeds := []string{
		"", "npm install lodash@^4.17.0", "pip install 'requests>=2'",
		"DB_PASSWORD=hunter2", "--password=x", "mysql --password hunter2",
		`{"token": "abc", "max_tokens": 5}`, "Authorization: Bearer abc.def",
		"https://bob:pw@example.com/?access_token=abc#id_token=x",
		"GITHUB_TOKEN=" + ghToken, patToken, npmToken, pypiToken, slackToken,
		awsKeyID + " " + awsSecret, "aws_secret_access_key=" + awsSecret, jwt, pem, anthropic,
		"Cookie: a=b", "https://hooks.slack.com/services/T0/B0/xyz",
		"password=" + ghToken + "@host", "token:" + jwt, "-----BEGIN PRIVATE KEY-----" + pem,
		"https://" + ghToken + ":" + npmToken + "@h/?sig=" + awsKeyID,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := event.Redact(s)
		if again := event.Redact(r); again != r {
			t.Fatalf("Redact not idempotent:\n in  %q\n 1st %q\n 2nd %q", s, r, again)
		}
		if l := leak(r); l != "" {
			t.Fatalf("Redact(%q) = %q, which still holds %q", s, r, l)
		}
		u := event.RedactURL(s)
		if again := event.RedactURL(u); again != u {
			t.Fatalf("RedactURL not idempotent:\n in  %q\n 1st %q\n 2nd %q", s, u, again)
		}
		if l := leak(u); l != "" {
			t.Fatalf("RedactURL(%q) = %q, which still holds %q", s, u, l)
		}
	})
}

func FuzzRedactArgv(f *testing.F) {
	f.Add("mysql\x00-uroot\x00-phunter2\x00db")
	f.Add("curl\x00-u\x00bob:pw\x00-H\x00Authorization: Bearer x\x00https://a:b@h/?token=1")
	f.Add("docker\x00login\x00-p\x00pw\x00--password\x00" + ghToken)
	f.Add("env\x00NPM_TOKEN=" + npmToken + "\x00npm\x00publish")
	f.Fuzz(func(t *testing.T, joined string) {
		argv := strings.Split(joined, "\x00")
		in := slices.Clone(argv)
		r := event.RedactArgv(argv)
		if !slices.Equal(argv, in) {
			t.Fatalf("RedactArgv modified its input: %q became %q", in, argv)
		}
		if len(r) != len(argv) {
			t.Fatalf("RedactArgv(%q) has %d elements, want %d", argv, len(r), len(argv))
		}
		if again := event.RedactArgv(r); !slices.Equal(again, r) {
			t.Fatalf("RedactArgv not idempotent:\n in  %q\n 1st %q\n 2nd %q", argv, r, again)
		}
		for _, a := range r {
			if l := leak(a); l != "" {
				t.Fatalf("RedactArgv(%q) = %q, which still holds %q", argv, r, l)
			}
		}
	})
}

func TestRedactTokensInContext(t *testing.T) {
	tokens := []string{awsKeyID, awsTempID, ghToken, ghoToken, patToken, npmToken, pypiToken, slackToken, jwt, pem, anthropic}
	wrappers := []string{
		"%s", " %s ", "x=%s", "TOKEN=%s", "'%s'", `"%s"`, "(%s)", "[%s]", "%s,%s", "%s%s",
		"https://%s@github.com/", "https://u:%s@h/", "https://h/?x=%s", "Authorization: Bearer %s",
		"Bearer %s", "--token %s", "--password=%s", `{"k": "%s"}`, "password: %s\n", "\t%s\n",
	}
	for _, tok := range tokens {
		for _, w := range wrappers {
			in := strings.ReplaceAll(w, "%s", tok)
			got := event.Redact(in)
			if l := leak(got); l != "" {
				t.Errorf("Redact(%q) = %q, which still holds %q", in, got, l)
			}
			if again := event.Redact(got); again != got {
				t.Errorf("Redact(Redact(%q)) = %q, want %q", in, again, got)
			}
			if u := event.RedactURL(in); leak(u) != "" {
				t.Errorf("RedactURL(%q) = %q, which still holds %q", in, u, leak(u))
			}
		}
	}
}
