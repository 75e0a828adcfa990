package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/sandtrail/sandtrail/record/event"
)

// ErrBadChallenge: the upstream's WWW-Authenticate Bearer challenge, or
// its token endpoint's answer, is one the mirror cannot use.
var ErrBadChallenge = errors.New("oci: unusable bearer token challenge")

// maxToken bounds a token endpoint's answer.
const maxToken = 1 << 20

// tokenTransport answers the upstream registry's Bearer challenges with
// anonymous tokens (the token flow of the distribution spec's auth, which
// Docker Hub needs even for public images). Tokens are kept per
// repository and sent to the upstream's host only, never to a host it
// redirects to (a blob's CDN).
type tokenTransport struct {
	base   http.RoundTripper
	host   string
	secure bool // the upstream is https: so must its token realm be

	mu     sync.Mutex
	tokens map[string]string // repository → token
}

// maxTokens bounds the tokens kept.
const maxTokens = 1024

func newTokenTransport(c *http.Client, upstream *url.URL) *tokenTransport {
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &tokenTransport{base: base, host: upstream.Host, secure: upstream.Scheme == "https", tokens: map[string]string{}}
}

// RoundTrip sends req with the repository's token when it has one, and
// once more with a new token when the upstream answers 401 with a Bearer
// challenge.
func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.host || req.Body != nil && req.Body != http.NoBody {
		return t.base.RoundTrip(req)
	}
	repo := repository(req.URL.Path)
	t.mu.Lock()
	tok := t.tokens[repo]
	t.mu.Unlock()
	resp, err := t.base.RoundTrip(withToken(req, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	ch, ok := parseChallenge(resp.Header.Get("WWW-Authenticate"))
	if !ok {
		return resp, nil
	}
	resp.Body.Close()
	tok, err = t.fetchToken(req, ch)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if len(t.tokens) >= maxTokens {
		clear(t.tokens)
	}
	t.tokens[repo] = tok
	t.mu.Unlock()
	return t.base.RoundTrip(withToken(req, tok))
}

func withToken(req *http.Request, tok string) *http.Request {
	if tok == "" {
		return req
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// repository is the repository of an API path ("/v2/<name>/blobs/…").
func repository(p string) string {
	_, rest, _ := strings.Cut(p, Prefix)
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, sep); i >= 0 {
			return rest[:i]
		}
	}
	return ""
}

// fetchToken asks the challenge's realm for an anonymous token.
func (t *tokenTransport) fetchToken(req *http.Request, ch map[string]string) (string, error) {
	realm, err := url.Parse(ch["realm"])
	if err != nil || realm.Host == "" || (realm.Scheme != "https" && (t.secure || realm.Scheme != "http")) {
		return "", fmt.Errorf("%w: realm %q", ErrBadChallenge, event.Clip(ch["realm"], 120))
	}
	q := realm.Query()
	for _, k := range []string{"service", "scope"} {
		if ch[k] != "" {
			q.Set(k, ch[k])
		}
	}
	realm.RawQuery = q.Encode()
	treq, err := http.NewRequestWithContext(req.Context(), http.MethodGet, realm.String(), nil)
	if err != nil {
		return "", fmt.Errorf("asking for a registry token: %w", err)
	}
	treq.Header.Set("User-Agent", req.Header.Get("User-Agent"))
	resp, err := (&http.Client{Transport: t.base}).Do(treq)
	if err != nil {
		return "", fmt.Errorf("asking for a registry token: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: the token endpoint answered %s", ErrBadChallenge, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxToken))
	if err != nil {
		return "", fmt.Errorf("reading a registry token: %w", err)
	}
	return parseToken(b)
}

// parseToken reads a token endpoint's answer: {"token": …} or
// {"access_token": …}.
func parseToken(b []byte) (string, error) {
	var r struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadChallenge, err)
	}
	tok := r.Token
	if tok == "" {
		tok = r.AccessToken
	}
	if tok == "" || strings.ContainsAny(tok, " \r\n\t") {
		return "", fmt.Errorf("%w: no usable token", ErrBadChallenge)
	}
	return tok, nil
}

// parseChallenge reads a WWW-Authenticate header's Bearer challenge:
// `Bearer realm="…",service="…",scope="…"`, its parameters by name.
func parseChallenge(h string) (map[string]string, bool) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return nil, false
	}
	params := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, false
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if v, rest, ok = cutValue(v); !ok {
			return nil, false
		}
		params[k] = v
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ","))
	}
	return params, params["realm"] != ""
}

// cutValue reads one parameter value, quoted (with \-escapes) or a bare
// token, and returns what follows it.
func cutValue(s string) (v, rest string, ok bool) {
	s = strings.TrimLeft(s, " ")
	if !strings.HasPrefix(s, `"`) {
		v, rest, _ = strings.Cut(s, ",")
		return strings.TrimSpace(v), rest, true
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i < len(s) {
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}
