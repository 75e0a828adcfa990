// Package mirror is sandtrail's verifying pull-through registry mirror.
// One HTTP listener serves every ecosystem under its own path prefix
// (/npm/, …), registered in one ordered list (ecosystems.go), and the
// HTTP-proxy form of requests (an absolute URI, as apt sends with
// Acquire::http::Proxy) for the upstream hosts the configuration names.
//
// Trust model: the mirror runs as root outside the agent's reach and is
// the trusted account of the bytes an install received. It never serves a
// byte that failed verification: artifacts stream through a verifier into
// the cache and are served from it only when every digest (and the
// registry's signature, where the ecosystem has one) matched. It refuses
// hosts it was not configured for. Each client is attributed to its
// session by the kernel (sock_diag finds the cgroup of the client's
// socket), never by anything the client sends, and every artifact served
// or refused becomes a pkg.fetch event in that session.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/kernel/peercred"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/registry-mirror/cache"
	"github.com/sandtrail/sandtrail/registry-mirror/fetch"
	"github.com/sandtrail/sandtrail/resolver"
)

// Sessions names the session of a cgroup (attribution.Sessions); the
// session manager is one. The mirror attributes a client through the one
// attribution step (attribution.Attributor.Socket): its socket's cgroup,
// by sock_diag.
type Sessions = attribution.Sessions

// Processes names the process behind a client's connection, by its
// socket's cookie, and whether it is an agent's process that no live shim
// started: the kernel collector's record of the connect, and the process
// tree, both the daemon's.
type Processes interface {
	Process(cookie uint64) (p event.Proc, unshimmed bool, ok bool)
}

// Mirror serves the ecosystems.
type Mirror struct {
	env       *fetch.Env
	policy    *fetch.Switch
	upstreams map[string]string // Config.Upstreams
	log       hclog.Logger
	clients   *attribution.Attributor // the attribution step over Config.Sessions; nil without
	procs     Processes
	// bypass says which (session, pid) already has its shim_bypass alert.
	bypassMu sync.Mutex
	bypassed map[bypassKey]bool
	prefixes []route            // by prefix, in the list's order
	hosts    map[string]handler // HTTP-proxy mode: upstream host → handler
}

type route struct {
	prefix string
	h      handler
}

// handler is an ecosystem's handler for requests beneath its prefix: path
// is the request path without the prefix, still escaped.
type handler interface {
	Serve(w http.ResponseWriter, r *http.Request, path string) error
}

// errorWriter is a handler whose clients read errors in a form of their
// own (OCI's distribution spec errors); the others get fetch.Write's.
type errorWriter interface {
	WriteError(w http.ResponseWriter, r *http.Request, err error) *fetch.Error
}

// Config configures a mirror.
type Config struct {
	// CacheDir holds the cache; CacheMax bounds its blobs (<= 0: no bound).
	CacheDir string
	CacheMax int64
	// Upstreams maps an ecosystem's name to its upstream URL; one not named
	// uses its default upstream.
	Upstreams map[string]string
	// MetaTTL is how long metadata is served from the cache (default 5m).
	MetaTTL time.Duration
	// MaxArtifact bounds an artifact whose size its metadata does not give
	// (default 1 GiB); MaxMeta a metadata document (default 64 MiB).
	MaxArtifact, MaxMeta int64
	// Policy decides on every version served.
	Policy fetch.Policy
	// Emit takes the mirror's events; it must not block (a record.Queue).
	Emit func(*event.Event)
	// Sessions attributes clients to sessions; nil: none.
	Sessions Sessions
	// Processes names the process behind each client; nil: none, and no
	// shim_bypass from the mirror.
	Processes Processes
	// Host is recorded in the events.
	Host string
	Log  hclog.Logger
	// HTTP is the upstream client (default: one with timeouts).
	HTTP *http.Client
	// Dialed, when set, is told the host name and the address of every
	// upstream connection the default client makes (not called with HTTP
	// set). The host refuses those addresses to its sessions: the
	// registries' addresses are then closed to a session that names them
	// by address, around the mirror.
	Dialed func(host string, addr netip.Addr)
}

// New builds a mirror from cfg.
func New(cfg Config) (*Mirror, error) {
	if cfg.Policy == nil || cfg.Emit == nil || cfg.Log == nil {
		return nil, errors.New("mirror: a policy, an emit function and a logger are required")
	}
	c, err := cache.Open(cfg.CacheDir, cfg.CacheMax)
	if err != nil {
		return nil, err
	}
	m := &Mirror{policy: fetch.NewSwitch(cfg.Policy), upstreams: cfg.Upstreams}
	env := &fetch.Env{Cache: c, Policy: m.policy, Log: cfg.Log.Named("mirror"), Now: time.Now,
		MetaTTL: or(cfg.MetaTTL, 5*time.Minute), MaxArtifact: or(cfg.MaxArtifact, 1<<30),
		Upstream: &fetch.Upstream{HTTP: cfg.HTTP, MaxMeta: or(cfg.MaxMeta, 64<<20), UserAgent: "sandtrail-mirror"},
		Record: func(r *fetch.Record) {
			now := time.Now()
			cfg.Emit(fetchEvent(r, cfg.Host, now))
			if m.firstBypass(r.Client) {
				cfg.Emit(bypassEvent(r, cfg.Host, now))
			}
		},
		Filter: func(f *fetch.Filtered) { cfg.Emit(filterEvent(f, cfg.Host, time.Now())) }}
	if env.Upstream.HTTP == nil {
		env.Upstream.HTTP = upstreamClient(cfg.Dialed)
	}
	m.env, m.log, m.procs = env, env.Log, cfg.Processes
	if cfg.Sessions != nil {
		m.clients = attribution.New(cfg.Sessions)
	}
	m.hosts, m.bypassed = map[string]handler{}, map[bypassKey]bool{}
	for key, raw := range cfg.Upstreams {
		if err := CheckUpstream(key, raw); err != nil {
			return nil, fmt.Errorf("mirror: upstreams: %w", err)
		}
	}
	for _, e := range ecosystems {
		var err error
		if e.newNamed != nil {
			err = m.addNamed(e, cfg.Upstreams)
		} else {
			err = m.add(e, cfg.Upstreams[e.name])
		}
		if err != nil {
			return nil, err
		}
	}
	if err := checkApproved(cfg.Policy, cfg.Upstreams); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return m, nil
}

// addNamed sets up ecosystem e with every upstream of all named for it:
// NAME (as "") and NAME/UPSTREAM (as "UPSTREAM").
func (m *Mirror) addNamed(e ecosystem, all map[string]string) error {
	up := map[string]string{}
	for k, v := range all {
		if k == e.name {
			up[""] = v
		} else if sub, ok := strings.CutPrefix(k, e.name+"/"); ok {
			up[sub] = v
		}
	}
	h, err := e.newNamed(m.env, up)
	if err != nil {
		return fmt.Errorf("mirror: %s: %w", e.name, err)
	}
	m.prefixes = append(m.prefixes, route{e.prefix, h})
	if hs, ok := h.(hoster); ok && e.proxy {
		for _, host := range hs.Hosts() {
			m.hosts[strings.ToLower(host)] = h
		}
	}
	return nil
}

// add sets up ecosystem e with its upstream (raw, or its default).
func (m *Mirror) add(e ecosystem, raw string) error {
	if raw == "" {
		raw = e.upstream
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("mirror: %s upstream %q is not an http(s) URL", e.name, raw)
	}
	h, err := e.new(m.env, u, e.prefix)
	if err != nil {
		return fmt.Errorf("mirror: %s: %w", e.name, err)
	}
	m.prefixes = append(m.prefixes, route{e.prefix, h})
	if e.proxy {
		m.hosts[strings.ToLower(u.Host)] = h
	}
	return nil
}

// upstreamClient is the default upstream client: bounded dial, TLS and
// header times, no overall timeout (a large artifact takes what it takes;
// the verifier bounds its size). Each connection it makes is told to
// dialed (nil: none) with the host it was made for.
func upstreamClient(dialed func(host string, addr netip.Addr)) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if dialed != nil {
		dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(addr)
			if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
				if ip, ok := netip.AddrFromSlice(ta.IP); ok {
					dialed(host, ip.Unmap())
				}
			}
			return c, nil
		}
	}
	t.TLSHandshakeTimeout = 15 * time.Second
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// SetPolicy puts p in force in place of the mirror's policy (a reload):
// a request that begins after it returns is decided by p, none by a
// decision remembered from the policy before. It returns an error, and keeps the policy in
// force, when p does not approve an upstream the mirror serves
// (checkApproved, as New).
func (m *Mirror) SetPolicy(p fetch.Policy) error {
	if p == nil {
		return errors.New("mirror: no policy")
	}
	if err := checkApproved(p, m.upstreams); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	m.policy.Set(p)
	return nil
}

// Cache returns the mirror's cache.
func (m *Mirror) Cache() *cache.Cache { return m.env.Cache }

// Names returns the names of the ecosystems the mirror serves, in the
// registry's order (resolver.Names).
func Names() []string {
	var n []string
	for _, e := range ecosystems {
		n = append(n, e.name)
	}
	return n
}

// ServeHTTP attributes the client and routes the request.
func (m *Mirror) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c := m.client(r)
	r = r.WithContext(fetch.WithClient(r.Context(), c))
	h, err := m.route(w, r)
	if err != nil {
		var e *fetch.Error
		if ew, ok := h.(errorWriter); ok {
			e = ew.WriteError(w, r, err)
		} else {
			e = fetch.Write(w, err)
		}
		m.log.Debug("request refused", "method", r.Method, "url", r.URL.String(), "status", e.Status, "code", e.Code,
			"session_id", c.SessionID, "client", c.Addr.String(), "error", e.Err)
		return
	}
	if m.log.IsTrace() {
		m.log.Trace("request served", "url", r.URL.String(), "session_id", c.SessionID, "took", time.Since(start))
	}
}

// npmRootTarball reports whether the path p is an npm tarball's path on
// the registry's root (/NAME/-/FILE.tgz, /@SCOPE/NAME/-/FILE.tgz): where
// npm asks for a tarball whose registry.npmjs.org URL it rewrote onto the
// configured registry's host by its pathname alone (pacote's
// replace-registry-host: `new URL(pathname, registry)` drops the
// registry's /npm/), as it does for a lockfile entry without `resolved`
// (omit-lockfile-registry-resolved) or one that names registry.npmjs.org.
func npmRootTarball(p string) bool {
	name, file, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/-/")
	return ok && name != "" && strings.HasSuffix(file, ".tgz") && !strings.Contains(file, "/") &&
		(!strings.Contains(name, "/") || strings.HasPrefix(name, "@") && strings.Count(name, "/") == 1)
}

// handler is the handler of the route with prefix, nil when none.
func (m *Mirror) handler(prefix string) handler {
	for _, rt := range m.prefixes {
		if rt.prefix == prefix {
			return rt.h
		}
	}
	return nil
}

// route serves r with the handler of its prefix (or its host, in
// HTTP-proxy mode), which it returns with the error; nil when none is the
// request's.
func (m *Mirror) route(w http.ResponseWriter, r *http.Request) (handler, error) {
	p := r.URL.EscapedPath()
	var h handler
	var rest string
	for _, rt := range m.prefixes {
		if s, ok := strings.CutPrefix(p, rt.prefix); ok && !r.URL.IsAbs() {
			h, rest = rt.h, s
			break
		}
	}
	if h == nil && !r.URL.IsAbs() && npmRootTarball(p) {
		h, rest = m.handler(npmPrefix), p[1:]
	}
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return h, fetch.Errorf(http.StatusMethodNotAllowed, "method", nil, "the mirror serves GET and HEAD only")
	case r.URL.IsAbs():
		return m.proxy(w, r)
	case h == nil:
		return nil, fetch.Errorf(http.StatusNotFound, "not_found", nil, "no ecosystem at %s (the mirror serves %s)", event.Clip(p, 120), m.prefixList())
	}
	return h, h.Serve(w, r, rest)
}

// proxy serves an absolute-URI request for a configured upstream host.
func (m *Mirror) proxy(w http.ResponseWriter, r *http.Request) (handler, error) {
	h, ok := m.hosts[strings.ToLower(r.URL.Host)]
	if !ok || r.URL.Scheme != "http" {
		c := fetch.ClientOf(r.Context())
		m.env.Record(&fetch.Record{Ecosystem: resolver.Deb, Name: r.URL.Host, URL: r.URL.String(), Outcome: fetch.UnknownSource, Client: c,
			Verdict: "block", Reason: "the mirror proxies only its configured upstream hosts", Rule: "mirror.upstreams"})
		return nil, fetch.Errorf(http.StatusForbidden, fetch.UnknownSource, nil, "%s is not an upstream this mirror serves", event.Clip(r.URL.Host, 120))
	}
	return h, h.Serve(w, r, r.URL.EscapedPath())
}

func (m *Mirror) prefixList() string {
	var p []string
	for _, rt := range m.prefixes {
		p = append(p, rt.prefix)
	}
	return strings.Join(p, " ")
}

// client attributes the request: its peer's address, and the session of
// the peer socket's cgroup when the peer is on this host.
func (m *Mirror) client(r *http.Request) fetch.Client {
	c := fetch.Client{}
	remote, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return c
	}
	c.Addr = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || m.clients == nil {
		return c
	}
	la, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return c
	}
	cl, err := m.clients.Socket("tcp", remote, la)
	if err != nil {
		if !errors.Is(err, peercred.ErrNoSocket) {
			m.log.Warn("attributing a client", "client", r.RemoteAddr, "error", err)
		}
		return c
	}
	c.SessionID = cl.Session
	if m.procs != nil && c.SessionID != "" {
		if p, unshimmed, ok := m.procs.Process(cl.Socket.Cookie); ok {
			c.Proc, c.Unshimmed = &p, unshimmed
		}
	}
	return c
}

// bypassKey is a process of a session.
type bypassKey struct {
	session string
	pid     int32
}

// maxBypassed bounds the processes remembered as alerted.
const maxBypassed = 4096

// firstBypass reports whether c is a session's process fetching around its
// shim that has no shim_bypass alert yet: one alert per process.
func (m *Mirror) firstBypass(c fetch.Client) bool {
	if !c.Unshimmed || c.SessionID == "" || c.Proc == nil {
		return false
	}
	m.bypassMu.Lock()
	defer m.bypassMu.Unlock()
	k := bypassKey{c.SessionID, c.Proc.Pid}
	if m.bypassed[k] {
		return false
	}
	if len(m.bypassed) >= maxBypassed {
		clear(m.bypassed)
	}
	m.bypassed[k] = true
	return true
}

// Serve serves ln until ctx ends, then shuts down within the grace period.
func (m *Mirror) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: m.log.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return err
}
