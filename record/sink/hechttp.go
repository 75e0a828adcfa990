package sink

// The HTTP parts that the HEC and OTLP sinks share: a client that trusts the
// system's roots or one CA file and never skips verification, a POST with an
// optionally gzip'd body, and a receiver's refusal as an error that says
// whether and when to try again.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ReceiverError is a receiver's refusal of a request: its URL, HTTP status,
// the text its body gave, and the wait its Retry-After header asked for.
// The Runner retries every failed write; Temporary says whether the same
// request may succeed later (429, 5xx) or the receiver refuses it as it is
// (other 4xx: a bad token, a body too large), which a retry repeats until
// the configuration or the receiver changes.
type ReceiverError struct {
	URL    string
	Status int
	Text   string
	Wait   time.Duration
}

func (e *ReceiverError) Error() string {
	msg := fmt.Sprintf("POST %s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Text != "" {
		msg += ": " + e.Text
	}
	if e.Wait > 0 {
		msg += fmt.Sprintf(" (retry after %s)", e.Wait)
	}
	return msg
}

// Temporary reports whether the receiver may take the same request later.
func (e *ReceiverError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// RetryAfter is the wait the receiver asked for (0 when it asked none);
// the Runner waits at least that long, up to its MaxBackoff, before its
// next try.
func (e *ReceiverError) RetryAfter() time.Duration { return e.Wait }

// Bounds of what a sink reads of a receiver's response.
const (
	maxResponse     = 1 << 20
	maxResponseText = 512
)

// httpTimeout is the default bound of one request.
const httpTimeout = 30 * time.Second

// newHTTPClient is a client for an http or https URL: with caFile, an
// https receiver must present a chain to that CA (and only that CA);
// without, to the system's roots. Verification is never skipped.
func newHTTPClient(caFile string, timeout time.Duration) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificate in it", caFile)
		}
		tc.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConnsPerHost = 4
	tr.Proxy = nil // the receiver configured, not one the environment names
	if timeout <= 0 {
		timeout = httpTimeout
	}
	// A redirect is not followed: it would post the record and its token
	// elsewhere (Go keeps the Authorization header for the same host, even
	// from https to http).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: noRedirect}, nil
}

// parseReceiverURL checks a sink's URL: http or https with a host, and
// plain http only to a loopback host when the requests carry credentials
// (a token, an authorization header), which would otherwise cross the
// network in the clear.
func parseReceiverURL(raw string, credentials bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http(s)://host[:port][/path]", raw)
	}
	if u.Scheme == "http" && credentials && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("url %q: credentials over plain http to a host that is not loopback; use https", raw)
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// cmpOr is v, or def when v is not positive.
func cmpOr[T int | int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// gzipSetting reads a compression setting: gzip (the default) or none.
func gzipSetting(c string) (bool, error) {
	switch c {
	case "", "gzip":
		return true, nil
	case "none":
		return false, nil
	}
	return false, fmt.Errorf("compression %q: want gzip or none", c)
}

// gzipped compresses body.
func gzipped(body []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	zw.Write(body)
	zw.Close()
	return b.Bytes()
}

// postJSON posts body (gzip'd when compress, with Content-Encoding: gzip)
// as application/json with the headers hdr, and returns the response's
// body, at most maxResponse bytes. A status other than 2xx is a
// *ReceiverError.
func postJSON(ctx context.Context, c *http.Client, u string, body []byte, compress bool, hdr http.Header) ([]byte, error) {
	if compress {
		body = gzipped(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("making request: %w", err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if compress {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("reading the response of %s: %w", u, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &ReceiverError{URL: u, Status: resp.StatusCode, Text: responseText(rb),
			Wait: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	return rb, nil
}

// responseText is what a refusal's body says: the text of Splunk's
// {"text":...,"code":N} or the message of a google.rpc.Status
// {"code":N,"message":...}, else the body itself; printable, at most
// maxResponseText bytes.
func responseText(body []byte) string {
	var r struct {
		Text    string          `json:"text"`
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	s := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &r) == nil && (r.Text != "" || r.Message != "") {
		s = r.Text + r.Message
		if len(r.Code) > 0 {
			s += " (code " + string(r.Code) + ")"
		}
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if len(s) > maxResponseText {
		s = s[:maxResponseText] + "..."
	}
	return s
}

// retryAfter is a Retry-After header's wait: delay-seconds or an HTTP
// date; 0 when it is absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(min(n, 3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), time.Hour)
	}
	return 0
}

// span is the entries [from, to) of a batch that go in one request.
type span struct{ from, to int }

// split groups a batch's encoded entries, in order, into requests of at
// most maxItems entries whose bytes (with overhead for each) add up to at
// most maxBytes; an entry larger than maxBytes alone goes in a request of
// its own, for the receiver to take or refuse.
func split(items [][]byte, overhead, maxBytes, maxItems int) []span {
	var out []span
	cur, size := span{}, 0
	for i, it := range items {
		n := len(it) + overhead
		if cur.to > cur.from && (size+n > maxBytes || cur.to-cur.from >= maxItems) {
			out, cur, size = append(out, cur), span{i, i}, 0
		}
		cur.to, size = i+1, size+n
	}
	if cur.to > cur.from {
		out = append(out, cur)
	}
	return out
}
