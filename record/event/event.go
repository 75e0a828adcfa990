// Package event defines the one Event type of the sandtrail record.
//
// Every producer (the kernel collector, the session manager, the shims, the
// registry mirror, the API, the detection rules and the journal itself)
// converts its own data to an Event in exactly one function. An Event has a
// small common envelope and one sub-object chosen by the category of its kind:
// "process.exec" carries Proc, "pkg.install" carries Pkg, and so on.
// The kinds that producers write are the Kind constants, listed in Kinds.
//
// The JSON encoding produced by encoding/json is the canonical encoding: the
// journal stores exactly those bytes as Merkle leaves. Field names are
// snake_case and each is named once; changing what a field means bumps
// SchemaVersion. This package imports only the standard library.
//
// Unmarshal is the one way untrusted bytes become an Event. Redact,
// RedactURL and RedactArgv mask credentials in free text, URLs and argv
// before a producer records them; Cut bounds an untrusted value that is
// kept, and Clip one that a message quotes. The schema is documented field by field in
// docs/schema.md and as JSON Schema in docs/event.schema.json; tests keep
// both in line with the type.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// SchemaVersion is the version of the event schema written in the "v" field.
const SchemaVersion = 1

// MaxEncodedSize is the largest canonical encoding accepted for one event.
// It leaves room for a process.exec at its worst: a 32 KiB argv of bytes
// that JSON escapes six-fold, its raw bytes, its 4 KiB tail both ways and
// 16 KiB of recorded environment, together with every other field.
const MaxEncodedSize = 512 << 10

// Source says who produced an event, and so how far it can be trusted.
type Source string

// The sources. Kernel, session, mirror, rules and journal events are
// produced by root-owned components; shim and api events are the agent side's
// or an orchestrator's own account and are joined with trusted events, never
// believed alone.
const (
	SourceKernel  Source = "kernel"
	SourceSession Source = "session"
	SourceShim    Source = "shim"
	SourceMirror  Source = "mirror"
	SourceAPI     Source = "api"
	SourceRules   Source = "rules"
	SourceJournal Source = "journal"
)

// Sources lists every valid Source, in a stable order.
var Sources = []Source{SourceKernel, SourceSession, SourceShim, SourceMirror, SourceAPI, SourceRules, SourceJournal}

// Valid reports whether s is one of Sources.
func (s Source) Valid() bool {
	for _, v := range Sources {
		if s == v {
			return true
		}
	}
	return false
}

// Event is one entry of the record.
type Event struct {
	// V is the schema version, SchemaVersion when written by this code.
	V int `json:"v"`
	// Seq is the journal sequence number, assigned by the journal on append
	// (the first entry is 0). Producers leave it zero.
	Seq uint64 `json:"seq"`
	// TS is when the event happened, encoded as RFC 3339 with nanoseconds.
	TS time.Time `json:"ts"`
	// SessionID is the session the event belongs to, as attributed by the
	// kernel or the ingest socket, never as claimed by the agent.
	SessionID string `json:"session_id"`
	// Host names the machine that recorded the event.
	Host string `json:"host,omitempty"`
	// Kind is "category.op", for example "process.exec" or "pkg.install";
	// alerts have the bare kind "alert".
	Kind string `json:"kind"`
	// Source is who produced the event.
	Source Source `json:"source"`
	// EventID is a unique id chosen by an ingest client. The daemon drops an
	// event whose EventID it has already journaled, so spooled events can be
	// replayed safely.
	EventID string `json:"event_id,omitempty"`

	Proc    *Proc    `json:"proc,omitempty"`
	File    *File    `json:"file,omitempty"`
	Net     *Net     `json:"net,omitempty"`
	Pkg     *Pkg     `json:"pkg,omitempty"`
	Tool    *Tool    `json:"tool,omitempty"`
	Model   *Model   `json:"model,omitempty"`
	Session *Session `json:"session,omitempty"`
	Limit   *Limit   `json:"limit,omitempty"`
	Alert   *Alert   `json:"alert,omitempty"`
	Loss    *Loss    `json:"loss,omitempty"`
	// Kernel is the payload of collector.capabilities.
	Kernel    *Kernel    `json:"kernel,omitempty"`
	Journal   *Journal   `json:"journal,omitempty"`
	Retention *Retention `json:"retention,omitempty"`
	// Investigate is the payload of investigate.* events.
	Investigate *Investigate `json:"investigate,omitempty"`
}

// Proc describes a process.
type Proc struct {
	Pid  int32   `json:"pid,omitempty"`
	PPid int32   `json:"ppid,omitempty"`
	UID  *uint32 `json:"uid,omitempty"`
	EUID *uint32 `json:"euid,omitempty"`
	AUID *uint32 `json:"auid,omitempty"`
	Comm string  `json:"comm,omitempty"`
	// Exe is the executable's name as the caller passed it to execve.
	Exe string `json:"exe,omitempty"`
	// ExePath is the path of the file the kernel executed, as the kernel
	// names it (/proc/PID/exe): a symlink's target, the binary behind a
	// descriptor, "/memfd:NAME (deleted)" for a memfd, a script's
	// interpreter. ExeDev and ExeIno are that file's device (as stat's
	// st_dev) and inode number. Fileless is true when it has no name in
	// any directory: a memfd, or a file unlinked before or during the
	// exec.
	ExePath  string `json:"exe_path,omitempty"`
	ExeDev   uint64 `json:"exe_dev,omitempty"`
	ExeIno   uint64 `json:"exe_ino,omitempty"`
	Fileless bool   `json:"fileless,omitempty"`
	// ExeSHA256 is the hex sha256 of the executed file; when it could not
	// be computed, ExeSHA256Missing says why instead.
	ExeSHA256        string   `json:"exe_sha256,omitempty"`
	ExeSHA256Missing string   `json:"exe_sha256_missing,omitempty"`
	Argv             []string `json:"argv,omitempty"`
	// ArgvRaw is argv's exact bytes, each argument NUL-terminated, when
	// they are not valid UTF-8 (which Argv cannot hold); redacted as Argv.
	ArgvRaw       []byte `json:"argv_raw,omitempty"`
	ArgvTruncated bool   `json:"argv_truncated,omitempty"`
	// Argc is the number of arguments the kernel counted (present even
	// when 0). ArgvSize is the size in bytes of the whole argument area,
	// and ArgvTail its last 4 KiB, split at NULs (the first element is
	// cut), when argv was truncated; ArgvTailRaw holds the tail's exact
	// bytes when they are not valid UTF-8.
	Argc        *uint32  `json:"argc,omitempty"`
	ArgvSize    uint64   `json:"argv_size,omitempty"`
	ArgvTail    []string `json:"argv_tail,omitempty"`
	ArgvTailRaw []byte   `json:"argv_tail_raw,omitempty"`
	// Env holds the NAME=value entries of the exec's environment whose
	// names the policy lists, in the environment's order, redacted.
	// EnvTruncated is true when the environment was longer than the
	// collector reads, so a listed variable may be missing.
	Env          []string  `json:"env,omitempty"`
	EnvTruncated bool      `json:"env_truncated,omitempty"`
	Cwd          string    `json:"cwd,omitempty"`
	ExitCode     *int32    `json:"exit_code,omitempty"`
	Signal       int32     `json:"signal,omitempty"`
	StartTS      time.Time `json:"start_ts,omitzero"`
	CgroupID     uint64    `json:"cgroup_id,omitempty"`
	// StdinPipe and StdoutPipe are the pipefs inode numbers of fd 0 and fd 1
	// when they are anonymous pipes: equal numbers join the two ends of a
	// pipeline such as `curl | sh`.
	StdinPipe  uint64 `json:"stdin_pipe,omitempty"`
	StdoutPipe uint64 `json:"stdout_pipe,omitempty"`
	// Ancestors are the process's ancestors at its exec, the parent first,
	// as the collector's table of the kernel's forks and execs knew them;
	// the list stops at the first one the table does not hold, or at
	// MaxAncestors.
	Ancestors []Ancestor `json:"ancestors,omitempty"`
	// StdinFrom is the process writing into the pipe on fd 0 (the one
	// whose stdout_pipe is this stdin_pipe), StdoutTo the one reading the
	// pipe on fd 1, when the collector saw it exec: the other ends of a
	// pipeline such as `curl | sh`, known to the kernel whatever the shell
	// typed. Of two ends, the one that execs second names the first.
	StdinFrom *PipePeer `json:"stdin_from,omitempty"`
	StdoutTo  *PipePeer `json:"stdout_to,omitempty"`
	// Errno is the symbolic error ("ENOENT") of a failed exec or ptrace
	// request, or of a refused syscall ("EPERM").
	Errno string `json:"errno,omitempty"`
	// Syscall names the syscall that the seccomp filter refused
	// (process.denied): "io_uring_setup", "unshare".
	Syscall string `json:"syscall,omitempty"`
	// Ptrace is the request of a process.ptrace event.
	Ptrace *Ptrace `json:"ptrace,omitempty"`
}

// Ptrace describes a ptrace(2) request that starts tracing.
type Ptrace struct {
	// Request is attach, seize or traceme.
	Request string `json:"request"`
	// TargetPid is the pid the request names: the tracee of attach and
	// seize, as the caller passed it; for traceme, the caller's parent,
	// which becomes its tracer.
	TargetPid int32 `json:"target_pid,omitempty"`
}

// File describes a file system operation.
type File struct {
	// Op is read, write, create, delete, rename, mount, umount, truncate,
	// chmod or link.
	Op string `json:"op"`
	// Path is the path operated on: the source of a rename, the mount
	// point of a mount, the new name of a link.
	Path    string `json:"path"`
	NewPath string `json:"new_path,omitempty"`
	// Target is what a link points to: a symbolic link's target as the
	// caller gave it (stored, not resolved), or the absolute path of a hard
	// link's existing file.
	Target string `json:"target,omitempty"`
	// Symlink is set for a symbolic link (symlink, symlinkat).
	Symlink bool `json:"symlink,omitempty"`
	// Dir is set when the entry created is a directory (mkdir, mkdirat);
	// Flags is then its mode.
	Dir   bool   `json:"dir,omitempty"`
	Flags uint32 `json:"flags,omitempty"`
	// Result is the syscall's return value when it succeeded.
	Result *int64 `json:"result,omitempty"`
	// Errno is the symbolic error ("EACCES") when it failed.
	Errno string `json:"errno,omitempty"`
	// Source and FSType are a mount's source (device or directory) and file
	// system type, as passed to mount(2).
	Source string `json:"source,omitempty"`
	FSType string `json:"fstype,omitempty"`
	// Count is how many identical operations by one process within a
	// short window this event stands for, when more than one.
	Count uint64 `json:"count,omitempty"`
}

// Net describes a network operation.
type Net struct {
	// Op is connect, send, close, listen, accept, dns or socket.
	Op string `json:"op"`
	// Proto is tcp, udp or unix.
	Proto    string `json:"proto,omitempty"`
	SrcIP    string `json:"src_ip,omitempty"`
	SrcPort  uint16 `json:"src_port,omitempty"`
	DstIP    string `json:"dst_ip,omitempty"`
	DstPort  uint16 `json:"dst_port,omitempty"`
	Domain   string `json:"domain,omitempty"`
	BytesOut uint64 `json:"bytes_out,omitempty"`
	BytesIn  uint64 `json:"bytes_in,omitempty"`
	// DurationMS is how long a connection was open (net.close).
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Count is how many identical operations (net.send to one
	// destination) this event stands for, when more than one.
	Count uint64 `json:"count,omitempty"`
	// Verdict is allowed, blocked or flagged.
	Verdict string `json:"verdict,omitempty"`
	// Reason says why the verdict is not allowed: the policy rule that
	// blocked or flagged it.
	Reason string `json:"reason,omitempty"`
	DNS    *DNS   `json:"dns,omitempty"`
	// UnixPath is the address of a unix socket connect or send (proto
	// unix): a path as the caller gave it, or "@" and an abstract name, as
	// ss(8) prints them. Bytes outside printable ASCII, and "\\", are
	// written as \xNN.
	UnixPath string `json:"unix_path,omitempty"`
	// Family, SockType and Protocol are the arguments of socket(2)
	// (net.socket), or the socket type of a unix connect or send: family
	// inet, inet6, packet, ... (af_N for others), sock_type stream, dgram,
	// raw, seqpacket, packet, ... (type_N for others), protocol as given.
	Family   string `json:"family,omitempty"`
	SockType string `json:"sock_type,omitempty"`
	Protocol uint32 `json:"protocol,omitempty"`
	// Errno names the error that socket(2) failed with (net.socket).
	Errno string `json:"errno,omitempty"`
}

// DNS describes one name lookup: the query and its answer.
type DNS struct {
	Query   string      `json:"query"`
	QType   string      `json:"qtype"`
	RCode   string      `json:"rcode,omitempty"`
	Answers []DNSAnswer `json:"answers,omitempty"`
}

// DNSAnswer is one resource record of a DNS answer.
type DNSAnswer struct {
	Type string `json:"type"`
	Data string `json:"data"`
	TTL  uint32 `json:"ttl"`
}

// Pkg describes a package install (from a shim) or fetch (from the mirror).
type Pkg struct {
	// Manager is the client: pip, npm, apt, cargo.
	Manager string `json:"manager,omitempty"`
	// Ecosystem is the purl type: pypi, npm, deb, cargo, oci.
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	// Requested is the spec the agent asked for ("^4.17.0", ">=2,<3").
	Requested string `json:"requested,omitempty"`
	// Resolved is the exact version that was installed or served.
	Resolved  string `json:"resolved,omitempty"`
	SourceURL string `json:"source_url,omitempty"`
	Registry  string `json:"registry,omitempty"`
	// Hash is written as the ecosystem writes it: "sha256:<hex>" or
	// "sha512-<base64>".
	Hash string `json:"hash,omitempty"`
	// Verified is set by the mirror once it checked the hash and signatures.
	Verified *bool `json:"verified,omitempty"`
	// Verdict is allow, flag or block.
	Verdict string `json:"verdict,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Direct is true when the agent named this package itself, false for a
	// dependency.
	Direct *bool `json:"direct,omitempty"`
	// RequestedBy names one package that depends on this one, on the way
	// to a direct one.
	RequestedBy string `json:"requested_by,omitempty"`
	// RequiredBy names every package that depends on this one, where the
	// manager's result says (npm's installed tree).
	RequiredBy []string `json:"required_by,omitempty"`
	Purl       string   `json:"purl,omitempty"`
	// Client is the fetching client's address as the mirror saw it.
	Client string `json:"client,omitempty"`
	// Cache is hit or miss.
	Cache string `json:"cache,omitempty"`

	// The mirror's account of a pkg.fetch (and a pkg.filter's removals).

	// Outcome is what the mirror did: served, blocked, cooldown,
	// hash_mismatch, signature_invalid, unknown_source, upstream_error or
	// not_found.
	Outcome string `json:"outcome,omitempty"`
	// Rule is the policy rule behind a refusal.
	Rule string `json:"rule,omitempty"`
	// Signature is verified when a registry signature over the artifact
	// was checked, unavailable when the upstream publishes no signing keys.
	Signature string `json:"signature,omitempty"`
	// Bytes is the size of the artifact served.
	Bytes int64 `json:"bytes,omitempty"`
	// LatencyMS is how long the mirror took to answer.
	LatencyMS int64 `json:"latency_ms,omitempty"`
	// MetadataStale: the metadata behind the answer was served from the
	// cache because the upstream could not be reached.
	MetadataStale bool `json:"metadata_stale,omitempty"`
	// Provenance says whether the version has provenance attestations,
	// where the ecosystem has them; ProvenanceLost that earlier versions
	// had them and this one does not.
	Provenance     *bool `json:"provenance,omitempty"`
	ProvenanceLost bool  `json:"provenance_lost,omitempty"`
	// InstallScripts names what runs package code when it is installed
	// (npm's preinstall, install and postinstall; binding.gyp).
	InstallScripts []string `json:"install_scripts,omitempty"`
	// Removed are the versions the policy removed from the metadata a
	// client was served (pkg.filter).
	Removed []PkgRemoval `json:"removed,omitempty"`
	// ManagerPid is the pid of the real package manager process that the
	// shim ran (pkg.install, pkg.blocked); the event's proc is the shim.
	ManagerPid int32 `json:"manager_pid,omitempty"`
	// Path is where a pkg.install put the package, relative to the
	// project (the tree's root): npm's "node_modules/a/node_modules/b".
	// Two copies of one name and version at two paths are two events.
	Path string `json:"path,omitempty"`
	// BundledIn is the purl of the package whose artifact carried this
	// one (pkg.install of an npm bundled dependency): the nearest
	// enclosing package that is not itself bundled. Such a copy has no
	// fetch of its own.
	BundledIn string `json:"bundled_in,omitempty"`
	// Bundles are the names of the packages an npm tarball the mirror
	// served carries inside it (pkg.fetch): its version's
	// bundleDependencies in the registry's metadata, whose integrity the
	// tarball was checked against. Only the mirror sets it; it is what
	// verifies a bundled copy's claim (bundled_in).
	Bundles []string `json:"bundles,omitempty"`
}

// PkgRemoval is one version the policy removed from the metadata the
// mirror served.
type PkgRemoval struct {
	Version string `json:"version"`
	// Outcome is blocked, cooldown or unknown_source.
	Outcome string `json:"outcome"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Tool describes one tool invocation by the agent: an MCP tools/call,
// resources/read or prompts/get seen by the MCP proxy, or a call an
// orchestrator reports through the API.
type Tool struct {
	Name string `json:"name"`
	// Server is the MCP server that served the call, Method the MCP method
	// (tools/call, resources/read, prompts/get); both empty for a call
	// reported without MCP.
	Server string `json:"server,omitempty"`
	Method string `json:"method,omitempty"`
	// Status is ok, error, timeout, refused (the policy's tool_io.refuse
	// kept it from the server), malformed (a message the proxy could not
	// parse, passed through as it was) or unanswered (the stream ended
	// before the server answered).
	Status string `json:"status,omitempty"`
	// Error is a short, redacted reason for error, refused and malformed.
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	IO
}

// Tool statuses.
const (
	ToolOK         = "ok"
	ToolError      = "error"
	ToolTimeout    = "timeout"
	ToolRefused    = "refused"
	ToolMalformed  = "malformed"
	ToolUnanswered = "unanswered"
)

// ToolStatuses lists every Tool status.
var ToolStatuses = []string{ToolOK, ToolError, ToolTimeout, ToolRefused, ToolMalformed, ToolUnanswered}

// Model describes one model call.
type Model struct {
	// Name is the model's name, as the caller gave it.
	Name   string `json:"name,omitempty"`
	Tokens int64  `json:"tokens,omitempty"`
	IO
}

// IO is what the daemon kept of a tool's or a model's input and output, as
// the policy's tool_io verbosity says: at names nothing; at summaries the
// redacted summaries with the lengths and sha256 of the whole; at full the
// same, and the whole input and output sealed to the investigators' age
// recipients, in a blob beside the journal whose sha256 is SealedRef.
type IO struct {
	InputSummary  string `json:"input_summary,omitempty"`
	OutputSummary string `json:"output_summary,omitempty"`
	InputBytes    int64  `json:"input_bytes,omitempty"`
	OutputBytes   int64  `json:"output_bytes,omitempty"`
	// InputSHA256 and OutputSHA256 are the hex sha256 of the whole input
	// and output, as the caller sent them.
	InputSHA256  string `json:"input_sha256,omitempty"`
	OutputSHA256 string `json:"output_sha256,omitempty"`
	// Verbosity is the level the daemon applied: names, summaries or full.
	Verbosity string `json:"verbosity,omitempty"`
	// SealedRef is "sha256:HEX", the sha256 of the sealed blob (age) that
	// holds the whole input and output; the journal's hashes cover it.
	SealedRef string `json:"sealed_ref,omitempty"`
}

// Investigate is the payload of investigate.unseal: an investigator
// revealed sealed tool I/O.
type Investigate struct {
	// Op is unseal.
	Op string `json:"op"`
	// Session is the session whose I/O was revealed, Events the seqs of
	// its events whose blobs were opened, Refs the blobs.
	Session string   `json:"session"`
	Events  []uint64 `json:"events,omitempty"`
	Refs    []string `json:"refs,omitempty"`
	// Reason is why, in the investigator's words.
	Reason string `json:"reason"`
	// UID is who asked (the control socket's peer, or the process that
	// opened the journal itself); Actor names it.
	UID   *uint32 `json:"uid,omitempty"`
	Actor string  `json:"actor,omitempty"`
	// Recipient is the age recipient of the identity that opened the
	// blobs: which investigator's key was used.
	Recipient string `json:"recipient,omitempty"`
}

// Session describes a session lifecycle step.
type Session struct {
	// Op is create, start, pause, resume, terminate or cleanup.
	Op          string  `json:"op"`
	Tenant      string  `json:"tenant,omitempty"`
	User        string  `json:"user,omitempty"`
	Template    string  `json:"template,omitempty"`
	Image       string  `json:"image,omitempty"`
	ImageDigest string  `json:"image_digest,omitempty"`
	Host        string  `json:"host,omitempty"`
	Limits      *Limits `json:"limits,omitempty"`
	// Reason is, for pause, api|timeout|auto; for terminate,
	// normal|timeout|oom|api|policy_violation|signal|host_lost.
	Reason     string `json:"reason,omitempty"`
	Actor      string `json:"actor,omitempty"`
	ExitStatus *int32 `json:"exit_status,omitempty"`
	// FSState is preserved, deleted or snapshot.
	FSState        string `json:"fs_state,omitempty"`
	SnapshotSHA256 string `json:"snapshot_sha256,omitempty"`
}

// Limits is the resource configuration of a session. Zero means unlimited.
type Limits struct {
	MemoryBytes int64   `json:"memory_bytes,omitempty"`
	CPUs        float64 `json:"cpus,omitempty"`
	Pids        int64   `json:"pids,omitempty"`
	TimeoutMS   int64   `json:"timeout_ms,omitempty"`
	DiskBytes   int64   `json:"disk_bytes,omitempty"`
	// NetRate is the network rate in bytes per second, each way.
	NetRate int64 `json:"net_rate_bytes_per_sec,omitempty"`
	// NetRateAction is throttle (the default: over the rate, packets are
	// dropped) or warn (only the limit.hit events).
	NetRateAction string `json:"net_rate_action,omitempty"`
}

// The types and actions of limit.hit events, named once for every producer
// (the session monitor, the collector's rate limiter).
const (
	LimitCPU     = "cpu_throttle"
	LimitMemory  = "memory_oom"
	LimitPids    = "pids"
	LimitDisk    = "disk_quota"
	LimitTimeout = "timeout"
	LimitNetRate = "net_rate"

	ActionThrottle = "throttle"
	ActionKill     = "kill"
	ActionWarn     = "warn"
)

// Limit describes a resource limit being hit.
type Limit struct {
	// Type is cpu_throttle, memory_oom, pids, disk_quota, timeout or net_rate.
	Type       string `json:"type"`
	Measured   int64  `json:"measured"`
	Configured int64  `json:"configured"`
	// Unit is what Measured and Configured count: bytes, usec, count, ms,
	// B/s.
	Unit string `json:"unit,omitempty"`
	// Action is throttle, kill or warn.
	Action string `json:"action"`
}

// MaxAncestors bounds Proc.Ancestors.
const MaxAncestors = 16

// Ancestor is one ancestor of an exec'd process: its pid, comm and the
// path of the file it executed (exe_path), as of the ancestor's own
// exec (or its fork, when it never exec'd).
type Ancestor struct {
	Pid  int32  `json:"pid"`
	Comm string `json:"comm,omitempty"`
	Exe  string `json:"exe,omitempty"`
}

// PipePeer is the process at the other end of a pipe: its pid, comm and
// the head of its argv (redacted, as the exec recorded it).
type PipePeer struct {
	Pid  int32    `json:"pid"`
	Comm string   `json:"comm,omitempty"`
	Argv []string `json:"argv,omitempty"`
}

// Alert is a detection raised by a rule.
type Alert struct {
	RuleID string `json:"rule_id"`
	Title  string `json:"title"`
	// Level is one of AlertLevels.
	Level string `json:"level"`
	// Refs are the sequence numbers of the events that matched.
	Refs    []uint64 `json:"refs,omitempty"`
	Summary string   `json:"summary,omitempty"`
	// Tags are the rule's tags (attack.t1059, ...).
	Tags []string `json:"tags,omitempty"`
	// Package is the purl of the package the alert is about: the one
	// whose install scripts did what the rule saw, or the one a
	// threat-intelligence record lists.
	Package string `json:"package,omitempty"`
	// Advisory is the id of the threat-intelligence record that raised
	// it (MAL-2025-1234).
	Advisory string `json:"advisory,omitempty"`
}

// AlertLevels are Sigma's levels, which alerts have, lowest first.
var AlertLevels = []string{"informational", "low", "medium", "high", "critical"}

// LevelRank is level's place in AlertLevels, -1 for an unknown level
// (below every known one).
func LevelRank(level string) int { return slices.Index(AlertLevels, level) }

// Loss records events that a producer dropped instead of blocking.
type Loss struct {
	Count  uint64 `json:"count"`
	Source string `json:"source"`
	// LostKind is the kind of the events lost ("process.exec"), when the
	// producer knows it.
	LostKind string `json:"lost_kind,omitempty"`
	// HostWide is set when the producer cannot know the session of what
	// it lost (the event then has no session_id).
	HostWide bool `json:"host_wide,omitempty"`
}

// Journal describes something the journal did to itself, such as cutting a
// torn tail back to the last complete entry at recovery.
type Journal struct {
	Segment  string `json:"segment,omitempty"`
	Offset   int64  `json:"offset,omitempty"`
	CutBytes int64  `json:"cut_bytes,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// The ops of Retention, each the op part of its kind.
const (
	RetentionPrune   = "prune"
	RetentionHold    = "hold"
	RetentionRelease = "release"
)

// Retention describes what the retention policy did to the record: a prune
// of the entries past the hot window, or a legal hold placed on a session
// or released. Its events have no session_id: they are the host's, and are
// never pruned themselves.
type Retention struct {
	// Op is prune, hold or release.
	Op string `json:"op"`
	// Session is the session held or released.
	Session string `json:"session,omitempty"`
	// Reason is why, in the operator's words.
	Reason string `json:"reason,omitempty"`
	// UID is who asked: the uid of the control socket's peer (SO_PEERCRED),
	// or of the process that opened the journal itself.
	UID *uint32 `json:"uid,omitempty"`
	// Actor names the uid: "root (uid 0)".
	Actor string `json:"actor,omitempty"`
	// HotDays is the hot window of a prune, and Cutoff the time it ended
	// at: sessions that ended before it, and entries of no session older
	// than it, were pruned.
	HotDays int       `json:"hot_days,omitempty"`
	Cutoff  time.Time `json:"cutoff,omitzero"`
	// Sessions are the sessions a prune removed, each with its entries.
	Sessions []PrunedSession `json:"sessions,omitempty"`
	// Sessionless counts the pruned entries of no session.
	Sessionless uint64 `json:"sessionless,omitempty"`
	// Entries counts all the entries the prune replaced with tombstones.
	Entries uint64 `json:"entries,omitempty"`
	// Ranges are the seqs pruned, as runs of consecutive seqs.
	Ranges []SeqRange `json:"ranges,omitempty"`
	// Held are the sessions due for pruning that a legal hold kept.
	Held []string `json:"held,omitempty"`
}

// PrunedSession is one session a prune removed.
type PrunedSession struct {
	ID      string `json:"id"`
	Entries uint64 `json:"entries"`
}

// SeqRange is a run of consecutive seqs, First to Last inclusive.
type SeqRange struct {
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

// SeqRanges are seqs, sorted and without repeats, as runs of consecutive
// seqs.
func SeqRanges(seqs []uint64) []SeqRange {
	var out []SeqRange
	for _, s := range seqs {
		if n := len(out); n > 0 && out[n-1].Last+1 == s {
			out[n-1].Last = s
			continue
		}
		out = append(out, SeqRange{First: s, Last: s})
	}
	return out
}

// Category returns the part of the kind before the first dot.
func (e *Event) Category() string {
	c, _, _ := strings.Cut(e.Kind, ".")
	return c
}

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("event: invalid")

// payloads maps a category to the name of the sub-object its kinds
// require, unless kindPayloads names another for the kind.
var payloads = map[string]string{
	"process":     "proc",
	"file":        "file",
	"net":         "net",
	"pkg":         "pkg",
	"tool":        "tool",
	"model":       "model",
	"session":     "session",
	"limit":       "limit",
	"alert":       "alert",
	"collector":   "loss",
	"journal":     "journal",
	"retention":   "retention",
	"investigate": "investigate",
}

// kindPayloads maps a kind whose required sub-object is not its category's
// to the name of the one it requires; Validate consults it before payloads.
var kindPayloads = map[string]string{
	KindCapabilities: "kernel",
}

// Categories returns the known kind categories, sorted.
func Categories() []string {
	out := make([]string, 0, len(payloads))
	for c := range payloads {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// has reports whether the sub-object with the given JSON name is present.
func (e *Event) has(name string) bool {
	switch name {
	case "proc":
		return e.Proc != nil
	case "file":
		return e.File != nil
	case "net":
		return e.Net != nil
	case "pkg":
		return e.Pkg != nil
	case "tool":
		return e.Tool != nil
	case "model":
		return e.Model != nil
	case "session":
		return e.Session != nil
	case "limit":
		return e.Limit != nil
	case "alert":
		return e.Alert != nil
	case "loss":
		return e.Loss != nil
	case "kernel":
		return e.Kernel != nil
	case "journal":
		return e.Journal != nil
	case "retention":
		return e.Retention != nil
	case "investigate":
		return e.Investigate != nil
	}
	return false
}

// Validate checks the envelope: the version, a kind of a known category with
// its sub-object present (the category's, or the kind's own where
// kindPayloads names one), a valid source, a time and a session id, and a
// name for every capability of a kernel payload. Other sub-objects may
// accompany the required one (a limit.hit names its process in proc).
// Errors wrap ErrInvalid and name the field.
func (e *Event) Validate() error {
	if e.V != SchemaVersion {
		return fmt.Errorf("%w: v: unsupported schema version %d (want %d)", ErrInvalid, e.V, SchemaVersion)
	}
	if e.Kind == "" {
		return fmt.Errorf("%w: kind: empty", ErrInvalid)
	}
	if len(e.Kind) > 64 || strings.ContainsAny(e.Kind, " \t\r\n") {
		return fmt.Errorf("%w: kind: %q is not category.op", ErrInvalid, Clip(e.Kind, 64))
	}
	cat := e.Category()
	want, ok := payloads[cat]
	if !ok {
		return fmt.Errorf("%w: kind: unknown category %q", ErrInvalid, Clip(cat, 64))
	}
	if cat != "alert" && !strings.Contains(e.Kind, ".") {
		return fmt.Errorf("%w: kind: %q is not category.op", ErrInvalid, e.Kind)
	}
	if w, ok := kindPayloads[e.Kind]; ok {
		want = w
	}
	if !e.has(want) {
		return fmt.Errorf("%w: %s: required by kind %q", ErrInvalid, want, e.Kind)
	}
	if !e.Source.Valid() {
		return fmt.Errorf("%w: source: unknown %q", ErrInvalid, Clip(string(e.Source), 64))
	}
	if e.TS.IsZero() {
		return fmt.Errorf("%w: ts: missing", ErrInvalid)
	}
	if e.SessionID == "" && e.Source != SourceJournal && e.Source != SourceKernel && e.Source != SourceMirror &&
		(e.Source != SourceAPI || e.Category() != "pkg") {
		return fmt.Errorf("%w: session_id: missing", ErrInvalid)
	}
	if len(e.SessionID) > 128 {
		return fmt.Errorf("%w: session_id: longer than 128 bytes", ErrInvalid)
	}
	if e.Kernel != nil {
		for i, c := range e.Kernel.Capabilities {
			if c.Name == "" {
				return fmt.Errorf("%w: kernel.capabilities[%d].name: empty", ErrInvalid, i)
			}
		}
	}
	return nil
}

// Marshal returns the canonical encoding of e.
func Marshal(e *Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encoding event: %w", err)
	}
	if len(b) > MaxEncodedSize {
		return nil, fmt.Errorf("%w: encoded size %d exceeds %d bytes", ErrInvalid, len(b), MaxEncodedSize)
	}
	return b, nil
}

// DecodeStrict decodes the JSON value b into v, rejecting unknown fields
// and any data after the value: the decoding of untrusted bytes.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// dec.More would miss a stray '}' or ']': only the end of the input,
	// after optional white space, is acceptable.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

// Unmarshal decodes untrusted bytes into an Event. It rejects oversized
// input, unknown fields and trailing data, runs Validate, and rejects an
// event whose canonical encoding would exceed MaxEncodedSize. Every error
// wraps ErrInvalid.
func Unmarshal(b []byte) (*Event, error) {
	if len(b) > MaxEncodedSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrInvalid, len(b), MaxEncodedSize)
	}
	var e Event
	if err := DecodeStrict(b, &e); err != nil {
		return nil, fmt.Errorf("%w: decoding: %v", ErrInvalid, err)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	// The canonical encoding can be longer than the input: encoding/json
	// writes '<' and invalid UTF-8 as six-byte escapes, and writes the
	// required fields that the input left out, which turns each "{}," in
	// net.dns.answers into 29 bytes. Inputs that could grow past the limit
	// pay for re-encoding, so that everything accepted can be journaled.
	if len(b) > reencodeAbove {
		if _, err := Marshal(&e); err != nil {
			if errors.Is(err, ErrInvalid) {
				return nil, fmt.Errorf("re-encoding: %w", err)
			}
			return nil, fmt.Errorf("%w: re-encoding: %w", ErrInvalid, err)
		}
	}
	return &e, nil
}

// reencodeAbove is the input size above which Unmarshal re-encodes to check
// the canonical size. The worst growth is about tenfold (empty DNS answers)
// plus the envelope's required fields, so 1/16 of the limit is safe.
const reencodeAbove = MaxEncodedSize / 16

// U32 returns a pointer to v, for the optional numeric fields.
func U32(v uint32) *uint32 { return &v }

// I32 returns a pointer to v, for the optional numeric fields.
func I32(v int32) *int32 { return &v }

// I64 returns a pointer to v, for the optional numeric fields.
func I64(v int64) *int64 { return &v }

// Bool returns a pointer to v, for the optional boolean fields.
func Bool(v bool) *bool { return &v }
