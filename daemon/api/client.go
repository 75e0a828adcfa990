package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls the tool API: on the daemon's unix socket (NewUnixClient)
// or on its TCP listener with a token (NewTCPClient).
type Client struct {
	hc    *http.Client
	base  string
	token string
}

// NewUnixClient calls the API on the unix socket at path.
func NewUnixClient(path string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	return &Client{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: "http://sandtrail"}
}

// NewTCPClient calls the API at base (http://127.0.0.1:7420 or an https
// URL) with a bearer token.
func NewTCPClient(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tool API URL %q: want http(s)://HOST:PORT", base)
	}
	return &Client{hc: &http.Client{Timeout: 30 * time.Second}, base: strings.TrimRight(base, "/"), token: token}, nil
}

// Post posts one event to session ("self" for the caller's own).
func (c *Client) Post(ctx context.Context, session string, p *Post) (*Posted, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "<" stays one byte: a post's size follows its I/O
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	var out Posted
	return &out, c.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(session)+"/events", b.Bytes(), http.StatusCreated, &out)
}

// ToolPolicy asks for the policy's tool refusals.
func (c *Client) ToolPolicy(ctx context.Context) (*ToolPolicy, error) {
	var out ToolPolicy
	return &out, c.do(ctx, http.MethodGet, "/v1/policy/tools", nil, http.StatusOK, &out)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("tool API: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("tool API: %w", err)
	}
	if resp.StatusCode != want {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("tool API: %s %s: %d: %s", method, path, resp.StatusCode, e.Error)
		}
		return fmt.Errorf("tool API: %s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(b, out)
}
