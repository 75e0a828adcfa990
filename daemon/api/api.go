// Package api serves the daemon's HTTP API for the agent's tool
// invocations and model calls: on a unix socket (api.socket, by default
// /run/sandtrail/api.sock) and, when configured, on TCP with bearer tokens
// and TLS. docs/api.openapi.yaml is its contract; docs/agents.md shows
// clients.
//
//	POST /v1/sessions/{id}/events   one tool.invoke or model.io (Post), with
//	                                its whole input and output when the caller
//	                                has them; the daemon keeps of them what
//	                                the policy's tool_io says
//	GET  /v1/sessions/{id}          the session's facts (Facts)
//	GET  /v1/sessions/{id}/events   its journaled events as NDJSON, from
//	                                ?since=SEQ; ?follow=true keeps streaming
//	GET  /v1/policy/tools           what the MCP proxy needs of the policy
//
// {id} may be "self": the caller's own session.
//
// Trust model. Who calls is decided by the kernel or by a token, never by
// the request's bytes. On the unix socket the caller is attributed by the
// daemon's one attribution step (peer → pid → cgroup → session, with the
// pid-reuse check): a process inside a session may post and read facts
// only for its own session, and its events are marked source shim (its
// own account); root outside every session may name any session (source
// api); anyone else is refused. On TCP the caller presents a token whose
// scope is a session or "*"; a client of this host that the kernel places in a
// session (sock_diag) is held to that session whatever its token says. The
// event stream is the investigators': it is served to root and to "*"
// tokens, never to a caller inside a session, which would otherwise learn
// what the rules saw of it.
package api

import (
	"context"
	"errors"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// MaxBody bounds a posted event with its input and output.
const MaxBody = 16 << 20

// Post is the body of POST /v1/sessions/{id}/events.
type Post struct {
	// Kind is tool.invoke or model.io.
	Kind string `json:"kind"`
	// TS is when the call started; the daemon's clock when absent.
	TS time.Time `json:"ts,omitzero"`
	// EventID is the caller's id of the event (ingest.ValidEventID); one is
	// made when absent.
	EventID string `json:"event_id,omitempty"`
	// Tool (for tool.invoke) or Model (for model.io): what the caller says
	// of the call. The daemon fills the I/O fields itself; a caller's are
	// replaced, except a summary sent without the whole it summarises.
	Tool  *event.Tool  `json:"tool,omitempty"`
	Model *event.Model `json:"model,omitempty"`
	// Input and Output are the call's whole input and output, when the
	// caller has them (the MCP proxy does).
	Input  *string `json:"input,omitempty"`
	Output *string `json:"output,omitempty"`
}

// Posted is the reply to a post: where the event went and what was kept.
type Posted struct {
	Seq       uint64 `json:"seq"`
	EventID   string `json:"event_id"`
	Verbosity string `json:"verbosity"`
	SealedRef string `json:"sealed_ref,omitempty"`
	// Warning says what could not be kept (a seal that failed).
	Warning string `json:"warning,omitempty"`
}

// Facts are what GET /v1/sessions/{id} returns.
type Facts struct {
	ID string `json:"id"`
	// Live is set while this daemon runs the session.
	Live       bool          `json:"live"`
	Tenant     string        `json:"tenant,omitempty"`
	User       string        `json:"user,omitempty"`
	Template   string        `json:"template,omitempty"`
	Image      string        `json:"image,omitempty"`
	Limits     *event.Limits `json:"limits,omitempty"`
	UID        *uint32       `json:"uid,omitempty"`
	CgroupID   uint64        `json:"cgroup_id,omitempty"`
	Started    time.Time     `json:"started,omitzero"`
	Ended      bool          `json:"ended"`
	EndReason  string        `json:"end_reason,omitempty"`
	ExitStatus *int32        `json:"exit_status,omitempty"`
	// Events and the rest are the index's counts, when the daemon keeps
	// one.
	Events uint64 `json:"events,omitempty"`
	Alerts uint64 `json:"alerts,omitempty"`
	Lost   uint64 `json:"lost,omitempty"`
}

// ToolPolicy is GET /v1/policy/tools: the tool_io globs the MCP proxy
// refuses.
type ToolPolicy struct {
	Refuse []string `json:"refuse"`
}

// ErrNoSession is returned by Backend.Facts for a session nobody knows.
var ErrNoSession = errors.New("no such session")

// Backend is what the server needs of the daemon.
type Backend interface {
	// Record keeps of in and out what the policy's tool_io says for e's
	// tool (setting e's I/O fields, sealing at full) and journals e,
	// setting e.Seq. It returns a warning when it kept less than the
	// policy says (a seal that failed), and an error when nothing was
	// journaled.
	Record(ctx context.Context, e *event.Event, in, out *string) (warning string, err error)
	// Facts returns what the daemon knows of a session, ErrNoSession when
	// nothing.
	Facts(ctx context.Context, id string) (*Facts, error)
	// Scan calls fn with each journal entry from seq from, in order, until
	// the journal's end.
	Scan(ctx context.Context, from uint64, fn func(seq uint64, raw []byte) error) error
	// Size is how many entries the journal holds.
	Size() uint64
	// ToolPolicy is the policy's tool_io refuse list.
	ToolPolicy() ToolPolicy
}
