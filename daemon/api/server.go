package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sandtrail/sandtrail/collector/session"
	"github.com/sandtrail/sandtrail/kernel/attribution"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/ingest"
)

// Routes are the API's endpoints, as "METHOD PATH" (docs/api.openapi.yaml
// documents each).
var Routes = []string{
	"POST /v1/sessions/{id}/events",
	"GET /v1/sessions/{id}",
	"GET /v1/sessions/{id}/events",
	"GET /v1/policy/tools",
}

// Server serves the API for a Backend.
type Server struct {
	b      Backend
	ids    *attribution.Attributor
	tokens *TokenFile
	log    hclog.Logger
	// follow is how often a followed event stream looks for new entries.
	follow time.Duration
	// posts holds a token for each post being read and kept.
	posts chan struct{}

	mu    sync.Mutex
	peers map[net.Conn]*attribution.Peer
	https []*http.Server
}

// New returns a server over b that attributes unix peers with ids and TCP
// callers by tokens (nil: TCP callers are all refused).
func New(b Backend, ids *attribution.Attributor, tokens *TokenFile, log hclog.Logger) *Server {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Server{b: b, ids: ids, tokens: tokens, log: log.Named("api"), follow: 200 * time.Millisecond,
		peers: map[net.Conn]*attribution.Peer{}, posts: make(chan struct{}, maxPosts)}
}

// The bounds of a connection: a request's whole body must arrive within
// readTimeout, and an idle keep-alive connection (holding its peer's
// pidfd) is closed after idleTimeout. At most maxPosts posts are read and
// kept at once (each up to MaxBody); more are answered 503.
const (
	readTimeout = 2 * time.Minute
	idleTimeout = 2 * time.Minute
	maxPosts    = 8
)

// caller is who sent a request, as the kernel or a token says.
type caller struct {
	// session is the caller's own session: the one it is in, or the one
	// its token is scoped to; empty for root outside every session and for
	// "*" tokens.
	session string
	// any is set for root outside every session and "*" tokens: they may
	// name any session and read the event stream.
	any bool
	// inSession is set when the kernel places the caller in session: its
	// events are its own account (source shim).
	inSession bool
	pid       int32
	uid       *uint32
	cgroupID  uint64
}

type ctxKey struct{}

// ServeUnix serves the API on ln until Shutdown.
func (s *Server) ServeUnix(ln *net.UnixListener) error {
	hs := &http.Server{Handler: s.handler(s.unixCaller), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout, IdleTimeout: idleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			uc, ok := c.(*net.UnixConn)
			if !ok {
				return ctx
			}
			p, err := s.ids.Open(uc)
			if err != nil {
				s.log.Debug("peer not read", "error", err)
				return ctx
			}
			s.mu.Lock()
			s.peers[c] = p
			s.mu.Unlock()
			return context.WithValue(ctx, ctxKey{}, p)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st != http.StateClosed && st != http.StateHijacked {
				return
			}
			s.mu.Lock()
			p := s.peers[c]
			delete(s.peers, c)
			s.mu.Unlock()
			if p != nil {
				p.Close()
			}
		}}
	return s.serve(hs, ln)
}

// ServeTCP serves the API on ln, with TLS when cfg is not nil, until
// Shutdown. Callers present a bearer token.
func (s *Server) ServeTCP(ln net.Listener, cfg *tls.Config) error {
	hs := &http.Server{Handler: s.handler(s.tokenCaller), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout, IdleTimeout: idleTimeout}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return s.serve(hs, ln)
}

func (s *Server) serve(hs *http.Server, ln net.Listener) error {
	s.mu.Lock()
	s.https = append(s.https, hs)
	s.mu.Unlock()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops every listener, waiting for requests in flight until ctx
// is done; followed streams end at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	hss := slices.Clone(s.https)
	s.mu.Unlock()
	var errs []error
	for _, hs := range hss {
		hs.SetKeepAlivesEnabled(false)
		if err := hs.Shutdown(ctx); err != nil {
			errs = append(errs, hs.Close())
		}
	}
	return errors.Join(errs...)
}

// unixCaller attributes a unix socket's peer: in a session, or root
// outside every session; anyone else is refused.
func (s *Server) unixCaller(r *http.Request) (*caller, *apiError) {
	p, _ := r.Context().Value(ctxKey{}).(*attribution.Peer)
	if p == nil {
		return nil, errorf(http.StatusForbidden, "the caller's credentials could not be read")
	}
	a, err := s.ids.Attribute(p)
	if err != nil {
		return nil, errorf(http.StatusForbidden, "the caller could not be attributed: %v", err)
	}
	uid := a.UID
	c := &caller{pid: a.Pid, uid: &uid, cgroupID: a.CgroupID}
	switch {
	case a.Session != "":
		c.session, c.inSession = a.Session, true
	case a.UID == 0:
		c.any = true
	default:
		return nil, errorf(http.StatusForbidden, "uid %d outside every session may not use the API: only a process inside a session (for its own session) or root may", a.UID)
	}
	return c, nil
}

// tokenCaller authenticates a TCP caller by its bearer token, and holds a
// client of this host that the kernel places in a session to that session.
func (s *Server) tokenCaller(r *http.Request) (*caller, *apiError) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return nil, errorf(http.StatusUnauthorized, "missing bearer token (Authorization: Bearer TOKEN; sandtrail api token makes one)")
	}
	scope, ok, err := s.tokens.Scope(tok)
	if err != nil {
		s.log.Error("tokens file not read: every token is refused", "error", err)
	}
	if !ok {
		return nil, errorf(http.StatusUnauthorized, "unknown token")
	}
	c := &caller{}
	if scope == ScopeAny {
		c.any = true
	} else {
		c.session = scope
	}
	in, e := s.clientSession(r)
	if e != nil {
		return nil, e
	}
	if in != "" {
		if c.session != "" && c.session != in {
			return nil, errorf(http.StatusForbidden, "a caller in session %s may not use a token scoped to session %s", in, c.session)
		}
		c.session, c.any, c.inSession = in, false, true
	}
	return c, nil
}

// clientSession is the session the kernel places a TCP client of this
// host in (sock_diag), "" for a client of another host. A client of this
// host connects from one of its addresses, so its address is loopback or
// the very address it reached the listener on; one whose socket the
// kernel cannot name is refused: it could be in any session.
func (s *Server) clientSession(r *http.Request) (string, *apiError) {
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	la, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if err != nil || la == nil {
		return "", errorf(http.StatusForbidden, "the caller's address could not be read")
	}
	server, err := netip.ParseAddrPort(la.String())
	if err != nil {
		return "", errorf(http.StatusForbidden, "the listener's address could not be read")
	}
	if !client.Addr().IsLoopback() && client.Addr().Unmap() != server.Addr().Unmap() {
		return "", nil
	}
	if s.ids == nil {
		return "", errorf(http.StatusForbidden, "a client of this host cannot be attributed here")
	}
	cl, err := s.ids.Socket("tcp", client, server)
	if err != nil && !errors.Is(err, attribution.ErrNoCgroup) {
		return "", errorf(http.StatusForbidden, "a client of this host whose socket the kernel cannot name is refused: %v", err)
	}
	if errors.Is(err, attribution.ErrNoCgroup) {
		return "", errorf(http.StatusForbidden, "a client of this host whose cgroup the kernel cannot name is refused")
	}
	return cl.Session, nil
}

// apiError is an error reply: a status and a message.
type apiError struct {
	status int
	msg    string
}

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) handler(who func(*http.Request) (*caller, *apiError)) http.Handler {
	mux := http.NewServeMux()
	route := func(pattern string, h func(w http.ResponseWriter, r *http.Request, c *caller) *apiError) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			c, e := who(r)
			if e == nil {
				e = h(w, r, c)
			}
			if e != nil {
				writeJSON(w, e.status, map[string]string{"error": e.msg})
			}
		})
	}
	handlers := map[string]func(w http.ResponseWriter, r *http.Request, c *caller) *apiError{
		"POST /v1/sessions/{id}/events": s.post,
		"GET /v1/sessions/{id}":         s.facts,
		"GET /v1/sessions/{id}/events":  s.events,
		"GET /v1/policy/tools": func(w http.ResponseWriter, _ *http.Request, _ *caller) *apiError {
			writeJSON(w, http.StatusOK, s.b.ToolPolicy())
			return nil
		},
	}
	for _, r := range Routes {
		route(r, handlers[r])
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no such endpoint: %s %s (see docs/api.openapi.yaml)", r.Method, r.URL.Path)})
	})
	return mux
}

// target is the session a request names ({id}, "self" for the caller's
// own), checked against what the caller may reach.
func (c *caller) target(r *http.Request) (string, *apiError) {
	id := r.PathValue("id")
	if id == "self" {
		if c.session == "" {
			return "", errorf(http.StatusBadRequest, "the caller is in no session: name the session instead of self")
		}
		return c.session, nil
	}
	if !session.ValidID(id) {
		return "", errorf(http.StatusBadRequest, "session id %q: want 1-64 characters of [A-Za-z0-9_.-], the first a letter or digit", event.Clip(id, 64))
	}
	if !c.any && id != c.session {
		return "", errorf(http.StatusForbidden, "the caller is in session %s and may not reach session %s", c.session, id)
	}
	return id, nil
}

func (s *Server) post(w http.ResponseWriter, r *http.Request, c *caller) *apiError {
	sess, e := c.target(r)
	if e != nil {
		return e
	}
	select {
	case s.posts <- struct{}{}:
		defer func() { <-s.posts }()
	default:
		return errorf(http.StatusServiceUnavailable, "busy: %d posts in flight; try again", maxPosts)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "Content-Type %q: want application/json", event.Clip(ct, 64))
	}
	p, err := DecodePost(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return errorf(http.StatusRequestEntityTooLarge, "body over %d bytes", MaxBody)
		}
		return errorf(http.StatusBadRequest, "%v", err)
	}
	ev := p.Event(sess, time.Now().UTC())
	if c.inSession {
		ev.Source = event.SourceShim
	}
	if c.pid != 0 {
		ev.Proc = &event.Proc{Pid: c.pid, UID: c.uid, CgroupID: c.cgroupID}
	}
	warn, err := s.b.Record(r.Context(), ev, p.Input, p.Output)
	if err != nil {
		s.log.Error("tool event not journaled", "session", sess, "error", err)
		return errorf(http.StatusServiceUnavailable, "not journaled: %v", err)
	}
	out := Posted{Seq: ev.Seq, EventID: ev.EventID, Warning: warn}
	if ev.Tool != nil {
		out.Verbosity, out.SealedRef = ev.Tool.Verbosity, ev.Tool.SealedRef
	} else if ev.Model != nil {
		out.Verbosity, out.SealedRef = ev.Model.Verbosity, ev.Model.SealedRef
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// DecodePost reads and checks a Post: one JSON object, no unknown field, a
// kind the API takes with its payload, a valid event id and status.
func DecodePost(r io.Reader) (*Post, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var p Post
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return nil, errors.New("body: more than one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("body: trailing data after the JSON object")
	}
	switch p.Kind {
	case event.KindToolInvoke:
		if p.Tool == nil || p.Model != nil {
			return nil, errors.New("tool.invoke needs tool, and no model")
		}
		if p.Tool.Name == "" {
			return nil, errors.New("tool.name: empty")
		}
		if p.Tool.Status != "" && !slices.Contains(event.ToolStatuses, p.Tool.Status) {
			return nil, fmt.Errorf("tool.status %q: want one of %s", event.Clip(p.Tool.Status, 64), strings.Join(event.ToolStatuses, ", "))
		}
		if p.Tool.DurationMS < 0 {
			return nil, errors.New("tool.duration_ms: negative")
		}
	case event.KindModelIO:
		if p.Model == nil || p.Tool != nil {
			return nil, errors.New("model.io needs model, and no tool")
		}
		if p.Model.Tokens < 0 {
			return nil, errors.New("model.tokens: negative")
		}
	default:
		return nil, fmt.Errorf("kind %q: the API takes tool.invoke and model.io", event.Clip(p.Kind, 64))
	}
	if p.EventID != "" && !ingest.ValidEventID(p.EventID) {
		return nil, fmt.Errorf("event_id: must be 1 to %d bytes of [A-Za-z0-9._:-]", ingest.MaxEventIDLen)
	}
	return &p, nil
}

// Event is the event a post journals in session sess, marked source api
// (the server marks a session caller's shim): the caller's account of the
// call, with the I/O fields left to the daemon.
func (p *Post) Event(sess string, now time.Time) *event.Event {
	e := &event.Event{V: event.SchemaVersion, TS: p.TS, SessionID: sess, Kind: p.Kind, Source: event.SourceAPI, EventID: p.EventID}
	if e.TS.IsZero() || e.TS.After(now.Add(time.Minute)) {
		e.TS = now
	}
	if e.EventID == "" {
		e.EventID = ingest.NewEventID()
	}
	if t := p.Tool; t != nil {
		e.Tool = &event.Tool{Name: t.Name, Server: t.Server, Method: t.Method, Status: t.Status, Error: event.Redact(t.Error),
			DurationMS: t.DurationMS, IO: event.IO{InputSummary: t.InputSummary, OutputSummary: t.OutputSummary}}
	}
	if m := p.Model; m != nil {
		e.Model = &event.Model{Name: m.Name, Tokens: m.Tokens, IO: event.IO{InputSummary: m.InputSummary, OutputSummary: m.OutputSummary}}
	}
	return e
}

func (s *Server) facts(w http.ResponseWriter, r *http.Request, c *caller) *apiError {
	sess, e := c.target(r)
	if e != nil {
		return e
	}
	f, err := s.b.Facts(r.Context(), sess)
	if errors.Is(err, ErrNoSession) {
		return errorf(http.StatusNotFound, "no session %s", sess)
	}
	if err != nil {
		return errorf(http.StatusInternalServerError, "%v", err)
	}
	if c.inSession {
		// What the record counts of a session is the investigators': an
		// agent that watched its alerts or its losses rise would learn
		// what the rules see and when the collector falls behind.
		f.Events, f.Alerts, f.Lost = 0, 0, 0
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// events streams the session's journaled entries as NDJSON, each line the
// stored event, from ?since=SEQ; with ?follow=true it keeps streaming new
// ones until the client goes away.
func (s *Server) events(w http.ResponseWriter, r *http.Request, c *caller) *apiError {
	sess, e := c.target(r)
	if e != nil {
		return e
	}
	if !c.any {
		return errorf(http.StatusForbidden, "the event stream is the investigators': root, or a token scoped to every session")
	}
	q := r.URL.Query()
	var since uint64
	if v := q.Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errorf(http.StatusBadRequest, "since %q: want a seq", event.Clip(v, 64))
		}
		since = n
	}
	follow := false
	if v := q.Get("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "follow %q: want true or false", event.Clip(v, 64))
		}
		follow = b
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	next := since
	ctx := r.Context()
	for {
		err := s.b.Scan(ctx, next, func(seq uint64, raw []byte) error {
			next = seq + 1
			ev, err := event.DecodeStored(raw)
			if err != nil || ev.SessionID != sess {
				return nil
			}
			ev.Seq = seq
			b, err := event.Marshal(ev)
			if err != nil {
				return nil
			}
			_, err = w.Write(append(b, '\n'))
			return err
		})
		if err != nil {
			return nil // the client went away, or the journal cannot be read: the stream ends
		}
		if fl != nil {
			fl.Flush()
		}
		if !follow {
			return nil
		}
		for s.b.Size() <= next {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(s.follow):
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
