package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"filippo.io/age"

	"github.com/sandtrail/sandtrail/daemon/api"
	"github.com/sandtrail/sandtrail/daemon/control"
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/ingest/server"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/query"
	"github.com/sandtrail/sandtrail/record/render"
	"github.com/sandtrail/sandtrail/record/sealed"
)

// APIConfig configures the tool API (daemon/api; docs/agents.md). It is
// always served on the unix socket api.sock beside the ingest socket.
type APIConfig struct {
	// Listen is a TCP address to serve it on as well, to callers with a
	// bearer token of TokensFile; empty: the unix socket only. An address
	// that is not loopback needs TLSCert and TLSKey.
	Listen string `mapstructure:"listen"`
	// TLSCert and TLSKey are the TCP listener's certificate and key (PEM).
	TLSCert string `mapstructure:"tls_cert"`
	TLSKey  string `mapstructure:"tls_key"`
	// TokensFile holds the tokens' hashes and scopes (api.Tokens;
	// `sandtrail api token` adds one). Default <data_dir>/api-tokens.
	TokensFile string `mapstructure:"tokens_file"`
}

// APISocket is the tool API's socket: api.sock beside the ingest socket.
func (c *Config) APISocket() string { return filepath.Join(c.SocketDir(), "api.sock") }

// APITokensFile is api.tokens_file, or its default.
func (c *Config) APITokensFile() string {
	if c.API.TokensFile != "" {
		return c.API.TokensFile
	}
	return filepath.Join(c.DataDir, "api-tokens")
}

// SealedDir is where full tool I/O is kept, sealed (record/sealed).
func (c *Config) SealedDir() string { return filepath.Join(c.DataDir, "sealed") }

// toolIO keeps what the policy's tool_io says of each tool call and model
// call: the one place the verbosity is applied, for the API's posts (with
// the whole input and output) and the ingest socket's events (summaries
// only).
type toolIO struct {
	pol        *policies.Engine
	store      *sealed.Store
	recipients []age.Recipient

	mu sync.Mutex
	// sealedBy counts the bytes sealed for each session, against
	// sealQuota.
	sealedBy map[string]int64
}

// sealQuota bounds what one session may have sealed: past it, its calls
// are kept as summaries, so that an agent cannot fill the disk with
// blobs.
const sealQuota = 1 << 30

// newToolIO opens the sealed store when the policy keeps anything in full.
func newToolIO(pol *policies.Engine, dir string) (*toolIO, error) {
	t := &toolIO{pol: pol, sealedBy: map[string]int64{}}
	p := pol.ToolIO()
	if len(p.Recipients) == 0 {
		return t, nil
	}
	var err error
	if t.recipients, err = sealed.ParseRecipients(p.Recipients); err != nil {
		return nil, fmt.Errorf("policy tool_io.recipients: %w", err)
	}
	if t.store, err = sealed.OpenStore(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// The bounds of what an event keeps: a summary is cut from the first
// summaryHead bytes (at a boundary no token crosses) and is at most
// summaryLen long; the other free-text fields at most fieldLen.
const (
	summaryHead = 16 << 10
	summaryLen  = 512
	fieldLen    = 256
)

// keep sets e's I/O fields from in and out (the whole input and output,
// nil when the caller has only summaries) at the verbosity the policy sets
// for e's tool, sealing them at full, and bounds and redacts the call's
// other free text. It returns a warning when it kept less than the policy
// says.
func (t *toolIO) keep(e *event.Event, in, out *string) string {
	var io *event.IO
	name := "model"
	switch {
	case e.Tool != nil:
		tl := e.Tool
		tl.Name, tl.Server, tl.Method = bound(tl.Name), bound(tl.Server), bound(tl.Method)
		tl.Error = bound(tl.Error)
		io, name = &tl.IO, tl.Name
	case e.Model != nil:
		e.Model.Name = bound(e.Model.Name)
		io = &e.Model.IO
	default:
		return ""
	}
	level := t.pol.ToolVerbosity(name)
	claimedIn, claimedOut := io.InputSummary, io.OutputSummary
	*io = event.IO{Verbosity: level}
	if level == policies.VerbosityNames {
		return ""
	}
	io.InputSummary, io.InputBytes, io.InputSHA256 = summarize(in, claimedIn)
	io.OutputSummary, io.OutputBytes, io.OutputSHA256 = summarize(out, claimedOut)
	if level != policies.VerbosityFull || in == nil && out == nil {
		return ""
	}
	warn := t.seal(e, io, name, deref(in), deref(out))
	if warn != "" {
		io.Verbosity = policies.VerbositySummaries
	}
	return warn
}

// seal seals the whole input and output of e into the store, within the
// session's quota, and names the blob in io.
func (t *toolIO) seal(e *event.Event, io *event.IO, name, in, out string) string {
	if t.store == nil {
		return "tool_io is full but no recipients are set: kept summaries"
	}
	n := int64(len(in) + len(out))
	t.mu.Lock()
	over := t.sealedBy[e.SessionID]+n > sealQuota
	if !over {
		t.sealedBy[e.SessionID] += n
	}
	t.mu.Unlock()
	if over {
		return fmt.Sprintf("the session has sealed %d MiB, its quota: kept summaries", sealQuota>>20)
	}
	ref, err := t.store.Seal(t.recipients, &sealed.Contents{Session: e.SessionID, EventID: e.EventID, Kind: e.Kind, Name: name, Input: in, Output: out})
	if err != nil {
		return "sealing failed, kept summaries: " + err.Error()
	}
	io.SealedRef = ref
	return ""
}

// bound is a redacted free-text field of at most fieldLen bytes.
func bound(s string) string { return event.Clip(event.Redact(s), fieldLen) }

// jsonEscapes turns the escapes JSON text carries (an MCP call's arguments
// and results) back into the characters the redaction rules look for at
// a token's start.
var jsonEscapes = strings.NewReplacer(`\n`, "\n", `\r`, "\r", `\t`, "\t", `\"`, `"`, `\/`, "/")

// summarize is a redacted summary of whole (or, without it, of the
// caller's own summary), with whole's length and sha256. It redacts
// before it escapes control characters, and cuts the head it redacts at a
// space or a delimiter, so that no token is split in two there.
func summarize(whole *string, claimed string) (summary string, n int64, sum string) {
	s := claimed
	if whole != nil {
		s = *whole
		h := sha256.Sum256([]byte(s))
		n, sum = int64(len(s)), hex.EncodeToString(h[:])
	}
	if len(s) > summaryHead {
		s = s[:summaryHead]
		if i := strings.LastIndexAny(s, " \t\r\n\",;:{}[]<>'`()|"); i > 0 {
			s = s[:i]
		}
	}
	return event.Clip(render.Clean(event.Redact(jsonEscapes.Replace(s)), summaryHead), summaryLen), n, sum
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// toolAPI is the daemon as the tool API's Backend.
type toolAPI struct{ d *Daemon }

var _ api.Backend = toolAPI{}

func (b toolAPI) Record(ctx context.Context, e *event.Event, in, out *string) (string, error) {
	e.Host = b.d.cfg.Host
	warn := b.d.tio.keep(e, in, out)
	if warn != "" {
		b.d.log.Warn("tool I/O kept below the policy's verbosity", "session", e.SessionID, "event_id", e.EventID, "why", warn)
	}
	// Journaled at once, through the live rules, as the ingest socket's
	// claims are.
	return warn, b.d.app.Append(ctx, e)
}

func (b toolAPI) Facts(ctx context.Context, id string) (*api.Facts, error) {
	f := &api.Facts{ID: id}
	known := false
	if s, ok := b.d.mgr.Get(id); ok {
		known, f.Live = true, true
		sp := s.Spec()
		f.Tenant, f.User, f.Template, f.Image = sp.Tenant, sp.User, sp.Template, sp.Image
		lim := sp.Limits
		f.Limits, f.CgroupID = &lim, s.CgroupID()
		if uid, ok := s.UID(); ok {
			f.UID = &uid
		}
		select {
		case <-s.Done():
			f.Ended = true
			f.EndReason, f.ExitStatus = s.Result()
		default:
		}
	}
	if ix := b.d.index(); ix != nil {
		ss, err := ix.Sessions(ctx, query.Filter{Session: id})
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			if s.ID != id {
				continue
			}
			known = true
			f.Started, f.Events, f.Alerts, f.Lost = s.First, s.Events, s.Alerts, s.Lost
			if s.Ended {
				f.Ended, f.EndReason, f.ExitStatus = true, s.EndReason, s.ExitStatus
			}
		}
	}
	if !known {
		return nil, api.ErrNoSession
	}
	return f, nil
}

func (b toolAPI) Scan(ctx context.Context, from uint64, fn func(uint64, []byte) error) error {
	return journal.Scan(b.d.jdir, from, func(seq uint64, raw []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(seq, raw)
	})
}

func (b toolAPI) Size() uint64 { return b.d.j.Size() }

func (b toolAPI) ToolPolicy() api.ToolPolicy {
	r := b.d.pol.ToolIO().Refuse
	if r == nil {
		r = []string{}
	}
	return api.ToolPolicy{Refuse: r}
}

// index is the daemon's index once its follower opened it, or nil.
func (d *Daemon) index() *index.Index {
	if d.ixReady == nil {
		return nil
	}
	select {
	case <-d.ixReady:
		if d.ret != nil {
			return d.ret.Index
		}
	default:
	}
	return nil
}

// startAPI serves the tool API on its unix socket and, with api.listen, on
// TCP.
func (d *Daemon) startAPI() error {
	cfg := d.cfg
	srv := api.New(toolAPI{d}, d.ids, api.NewTokenFile(cfg.APITokensFile()), d.log)
	ln, err := server.Listen(cfg.APISocket(), 0o666)
	if err != nil {
		return fmt.Errorf("tool API: %w", err)
	}
	d.api = srv
	go func() {
		if err := srv.ServeUnix(ln); err != nil {
			d.log.Error("tool API stopped", "socket", cfg.APISocket(), "error", err)
		}
	}()
	if cfg.API.Listen == "" {
		return nil
	}
	tcp, tlsCfg, err := listenAPI(cfg)
	if err != nil {
		return err
	}
	go func() {
		if err := srv.ServeTCP(tcp, tlsCfg); err != nil {
			d.log.Error("tool API stopped", "listen", cfg.API.Listen, "error", err)
		}
	}()
	d.log.Info("tool API on TCP", "listen", tcp.Addr().String(), "tls", tlsCfg != nil, "tokens", cfg.APITokensFile())
	return nil
}

// listenAPI listens on api.listen, refusing plain TCP off loopback: the
// tokens and the tool I/O would cross the network in the clear.
func listenAPI(cfg *Config) (net.Listener, *tls.Config, error) {
	var tlsCfg *tls.Config
	switch {
	case cfg.API.TLSCert != "" || cfg.API.TLSKey != "":
		cert, err := tls.LoadX509KeyPair(cfg.API.TLSCert, cfg.API.TLSKey)
		if err != nil {
			return nil, nil, fmt.Errorf("config: api.tls_cert and api.tls_key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	default:
		host, _, err := net.SplitHostPort(cfg.API.Listen)
		if err != nil {
			return nil, nil, fmt.Errorf("config: api.listen %q: %w", cfg.API.Listen, err)
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
			return nil, nil, fmt.Errorf("config: api.listen %q is not a loopback address: set api.tls_cert and api.tls_key, or the tokens and tool I/O cross the network in the clear", cfg.API.Listen)
		}
	}
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("tool API: %w", err)
	}
	return ln, tlsCfg, nil
}

// UnsealEvent is the investigate.unseal that journals inv on behalf of
// uid, before the investigator sees anything: the one place it is built,
// for the control socket (RecordUnseal) and for a CLI that opens the
// journal itself.
func UnsealEvent(host string, inv *event.Investigate, uid uint32) (*event.Event, error) {
	switch {
	case inv.Session == "":
		return nil, errors.New("unseal: no session")
	case strings.TrimSpace(inv.Reason) == "":
		return nil, errors.New("unseal: say why (--reason): the record keeps it")
	case len(inv.Events) == 0 || len(inv.Refs) == 0:
		return nil, errors.New("unseal: no sealed event named")
	}
	c := *inv
	c.Op, c.UID, c.Actor = "unseal", event.U32(uid), control.ActorName(uid)
	c.Events, c.Refs = slices.Clone(inv.Events), slices.Clone(inv.Refs)
	return &event.Event{Kind: event.KindInvestigateUnseal, Source: event.SourceJournal, Host: host, Investigate: &c}, nil
}

// RecordUnseal journals an investigator's unseal (control.Investigator).
func (d *Daemon) RecordUnseal(ctx context.Context, inv *event.Investigate, uid uint32) (uint64, error) {
	e, err := UnsealEvent(d.cfg.Host, inv, uid)
	if err != nil {
		return 0, err
	}
	if err := d.app.Append(ctx, e); err != nil {
		return 0, fmt.Errorf("journaling the unseal: %w", err)
	}
	d.log.Info("sealed tool I/O unsealed", "session_id", inv.Session, "events", len(inv.Events), "uid", uid, "reason", inv.Reason, "seq", e.Seq)
	return e.Seq, nil
}
