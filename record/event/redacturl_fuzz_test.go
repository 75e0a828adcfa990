package event_test

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// FuzzRedactURLSecret: whatever a URL's password, or the value of a
// sensitive query or fragment parameter, the redacted URL never holds it,
// and it keeps the scheme, the user and the host. Unlike FuzzRedact, whose
// oracle knows only tokens of known formats, the secret here is any
// string that can sit in its place in a URL.
func FuzzRedactURLSecret(f *testing.F) {
	f.Add("hunter2", "token", "https", "registry.npmjs.org")
	f.Add("p@ss:word", "access_token", "http", "127.0.0.1:8484")
	f.Add("x", "X-Amz-Signature", "https", "files.pythonhosted.org")
	f.Add("s3cr3t!$", "password", "git+https", "github.com")
	f.Add("AKIAIOSFODNN7EXAMPLE", "sig", "https", "h")
	f.Fuzz(func(t *testing.T, secret, param, scheme, host string) {
		const user = "bob"
		// The secret and the parts around it are what a URL can hold
		// there: no character that ends the part, no blank.
		if len(secret) < 3 || strings.ContainsAny(secret, "/?#&; \t\r\n\x00") || strings.ContainsAny(param, "=?#&;/ \t\r\n\x00") ||
			scheme == "" || strings.ContainsAny(scheme, ":/?#@ \t\r\n\x00") || host == "" || strings.ContainsAny(host, "/?#@ \t\r\n\x00") {
			return
		}
		if strings.Contains(scheme+"://"+user+"@"+host+"/simple/pkg/"+param+event.Mask, secret) {
			return // the secret is also where it is no secret
		}
		cases := []string{scheme + "://" + user + ":" + secret + "@" + host + "/simple/pkg/"}
		if sensitiveParam(param) {
			cases = append(cases,
				scheme+"://"+host+"/simple/pkg/?"+param+"="+secret,
				scheme+"://"+host+"/simple/pkg/?a=1&"+param+"="+secret+"&b=2",
				scheme+"://"+host+"/simple/pkg/#"+param+"="+secret)
		}
		for _, u := range cases {
			r := event.RedactURL(u)
			if strings.Contains(r, secret) {
				t.Fatalf("RedactURL(%q) = %q, which still holds %q", u, r, secret)
			}
			if !strings.HasPrefix(r, scheme+"://") {
				t.Fatalf("RedactURL(%q) = %q, which lost its scheme", u, r)
			}
		}
		if r := event.RedactURL(cases[0]); !strings.Contains(r, user+":") {
			t.Fatalf("RedactURL(%q) = %q, which lost its user", cases[0], r)
		}
	})
}

// sensitiveParam is the test's own reading of which query parameters hold
// secrets (RedactURL's doc: ?access_token=***): ASCII names that end in a
// word of a secret, ignoring case, and the bare ones that signed URLs use.
func sensitiveParam(name string) bool {
	for _, c := range []byte(name) {
		if c >= 0x80 {
			return false
		}
	}
	n := strings.ToLower(name)
	for _, w := range []string{"token", "password", "passwd", "secret", "signature", "api_key", "apikey", "auth", "credential"} {
		if strings.HasSuffix(n, w) {
			return true
		}
	}
	return n == "sig" || n == "key" || n == "code"
}
