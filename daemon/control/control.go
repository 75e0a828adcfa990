// Package control is the daemon's control socket: root drives the daemon's
// sessions through it (`sandtrail session …`, and `sandtrail run` when a
// daemon is running, so that one journal has one writer).
//
// Protocol: one request per connection. The client writes one JSON
// Request; the server answers with JSON Response lines: one for every op
// but run, which gets a first line once the session exists (with its id)
// and a last one with the result. A run request carries the client's
// stdin, stdout and stderr as SCM_RIGHTS descriptors with its first byte;
// the daemon gives them to the command, so its I/O never passes through
// the daemon. Closing a run connection before the result terminates the
// session (reason signal).
//
// Trust model: the socket is 0600 root and beneath /run/sandtrail; the
// server also checks the peer's credentials (SO_PEERCRED, package
// peercred) and refuses any peer whose uid is not 0, and, through the one
// attribution step (kernel/attribution), any root peer inside a session:
// a session's root (an apt maintainer script the broker runs, a session
// started as root) is the agent's, and must not drive the daemon. The
// actor recorded for pause and resume is the peer's user name and uid, and
// the uid recorded with a legal hold or release is the peer's
// (SO_PEERCRED), never one the request names: so only root outside every
// session places or lifts a hold, and the record says who. The client, in
// turn, talks only to a server that is root's (Dial checks SO_PEERCRED):
// a control socket that another user serves, at a path that user could
// write (a data dir beneath /tmp, SANDTRAIL_SOCKET), gets neither a
// request nor run's descriptors.
package control

import (
	"errors"
	"time"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/index"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/sink"
)

// The ops of a Request.
const (
	OpCreate  = "create"
	OpStart   = "start"
	OpPause   = "pause"
	OpResume  = "resume"
	OpStop    = "stop"
	OpCleanup = "cleanup"
	OpList    = "list"
	OpShow    = "show"
	OpRun     = "run"
	// OpAlerts journals alert events that root raised outside the daemon
	// (the re-hunt of `sandtrail intel import`), each in its own session.
	OpAlerts = "alerts"
	// OpStatus reports the daemon's sinks: cursor, lag, last error and
	// event-to-sink latency.
	OpStatus = "status"
	// OpRetention applies the retention policy now (DryRun: only says
	// what it would prune) and replies with its report.
	OpRetention = "retention"
	// OpHold places a legal hold on Session, for Reason; OpRelease lifts
	// it; OpHolds lists the holds in force. Each hold and release is
	// journaled with the caller's uid.
	OpHold    = "hold"
	OpRelease = "release"
	OpHolds   = "holds"
	// OpUnseal journals an investigate.unseal (Unseal) before the caller
	// reveals sealed tool I/O, with the caller's uid.
	OpUnseal = "unseal"
)

// ErrNoDaemon is returned when no daemon serves the control socket.
var ErrNoDaemon = errors.New("no sandtrail daemon is running (its control socket is absent or refuses connections)")

// ErrNotRoot is returned by Dial when the control socket's server is not
// root's.
var ErrNotRoot = errors.New("control: the control socket's server is not root")

// maxRequest bounds a request's size.
const maxRequest = 4 << 20

// Request is one request to the control socket.
type Request struct {
	// Op is one of the Op constants.
	Op      string `json:"op"`
	Session string `json:"session,omitempty"`
	// Reason is the pause reason (api, timeout, auto) or the stop reason.
	Reason string `json:"reason,omitempty"`
	// Keep is the cleanup's fs state.
	Keep string          `json:"keep,omitempty"`
	Spec *launch.Request `json:"spec,omitempty"`
	// Events are the alerts of an OpAlerts request.
	Events []*event.Event `json:"events,omitempty"`
	// DryRun makes OpRetention change nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Unseal is what OpUnseal journals; the daemon sets its uid and actor.
	Unseal *event.Investigate `json:"unseal,omitempty"`
}

// Response is one line of the server's answer.
type Response struct {
	OK       bool           `json:"ok"`
	Error    string         `json:"error,omitempty"`
	Session  *SessionInfo   `json:"session,omitempty"`
	Sessions []SessionInfo  `json:"sessions,omitempty"`
	Result   *launch.Result `json:"result,omitempty"`
	// Sinks are the daemon's sinks, for status.
	Sinks []sink.Status `json:"sinks,omitempty"`
	// Alert is an alert raised in a run's session, sent as it is raised,
	// between the reply that names the session and the one that says how
	// it ended.
	Alert *event.Event `json:"alert,omitempty"`
	// Retention is OpRetention's report.
	Retention *RetentionReport `json:"retention,omitempty"`
	// Holds are the legal holds in force, for OpHolds; OpHold's reply
	// holds the one it placed.
	Holds []index.Hold `json:"holds,omitempty"`
	// Seq is the seq of the event OpUnseal journaled.
	Seq uint64 `json:"seq,omitempty"`
}

// RetentionReport is what applying the retention policy pruned, or, on a
// dry run, would prune: the sessions that ended before the cutoff (the
// hot window, hot_days, before now) and the entries of no session older
// than it, from the index (rows deleted) and the journal (tombstones).
type RetentionReport struct {
	DryRun  bool      `json:"dry_run"`
	HotDays int       `json:"hot_days"`
	Cutoff  time.Time `json:"cutoff"`
	// Sessions are the sessions pruned (or to prune).
	Sessions []RetentionSession `json:"sessions"`
	// Held are the sessions due that a legal hold keeps.
	Held []RetentionSession `json:"held"`
	// Failed are the sessions due whose archiving failed: not pruned,
	// tried again at the next run.
	Failed []RetentionSession `json:"failed"`
	// Unsent are the sessions due that a sink has yet to send entries of
	// (its cursor is at or below their last seq): not pruned, so that no
	// sink loses them; UnsentSessionless counts such entries of no
	// session.
	Unsent            []RetentionSession `json:"unsent"`
	UnsentSessionless uint64             `json:"unsent_sessionless,omitempty"`
	// Sessionless counts the entries of no session pruned, in
	// SessionlessRanges.
	Sessionless       uint64           `json:"sessionless"`
	SessionlessRanges []event.SeqRange `json:"sessionless_ranges"`
	// Entries counts every entry pruned (or to prune).
	Entries uint64 `json:"entries"`
	// Journal is what the journal did; Forgotten the index rows of
	// events deleted; Events the seqs of the retention.prune events that
	// record it. All empty on a dry run.
	Journal   *journal.PruneResult `json:"journal,omitempty"`
	Forgotten uint64               `json:"forgotten"`
	Events    []uint64             `json:"events,omitempty"`
}

// RetentionSession is one session in a RetentionReport.
type RetentionSession struct {
	ID        string           `json:"id"`
	Entries   uint64           `json:"entries"`
	Ranges    []event.SeqRange `json:"ranges,omitempty"`
	LastTS    time.Time        `json:"last_ts"`
	EndReason string           `json:"end_reason,omitempty"`
	// Hold is the legal hold that keeps a held session.
	Hold *index.Hold `json:"hold,omitempty"`
	// Error is why a failed session's archiving failed.
	Error string `json:"error,omitempty"`
}

// SessionInfo is what list and show say about a session.
type SessionInfo struct {
	ID         string       `json:"id"`
	State      string       `json:"state"`
	User       string       `json:"user,omitempty"`
	Tenant     string       `json:"tenant,omitempty"`
	Template   string       `json:"template,omitempty"`
	Image      string       `json:"image,omitempty"`
	Limits     event.Limits `json:"limits"`
	CgroupID   uint64       `json:"cgroup_id"`
	CgroupPath string       `json:"cgroup_path,omitempty"`
	Dir        string       `json:"dir"`
	Workdir    string       `json:"workdir"`
	Argv       []string     `json:"argv,omitempty"`
	Created    time.Time    `json:"created"`
	Started    time.Time    `json:"started,omitzero"`
	Reason     string       `json:"reason,omitempty"`
	ExitStatus *int32       `json:"exit_status,omitempty"`
}
