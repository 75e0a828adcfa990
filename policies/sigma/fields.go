package sigma

import (
	"strconv"
	"strings"

	"github.com/sandtrail/sandtrail/record/event"
)

// ftype is the type of a field's value.
type ftype uint8

const (
	tStr  ftype = iota // one string
	tStrs              // a list of strings: a value matches when any element does
	tInt               // an integer, matched as a number or as its decimal text
	tBool              // true or false
)

// value is one field of one event. present is false when the field is not
// in the event's JSON encoding (an absent sub-object, or a zero value that
// encoding/json omits).
type value struct {
	present bool
	s       string
	list    []string
	n       int64
}

// field is a name a rule may use in its detection, and how to read it.
type field struct {
	id   int
	name string
	typ  ftype
	get  func(v *view) value
}

// category is a logsource: the event kinds it covers and the fields its
// rules may name.
type category struct {
	product string
	name    string
	// kinds are the event kinds an event must have to meet the category's
	// rules; a sandtrail category also takes kinds of its prefix that
	// event.Kinds does not list (prefix).
	kinds  []string
	prefix string
	fields map[string]*field
	order  []string
}

// allFields holds every field of every category, indexed by field.id.
var allFields []*field

func newField(name string, typ ftype, get func(v *view) value) *field {
	f := &field{id: len(allFields), name: name, typ: typ, get: get}
	allFields = append(allFields, f)
	return f
}

func str(s string) value { return value{present: s != "", s: s} }

func strs(l []string) value { return value{present: len(l) > 0, list: l} }

func num[T int32 | int64 | uint16 | uint32 | uint64](n T) value {
	return value{present: n != 0, n: int64(n)}
}

func ptrNum[T int32 | int64 | uint32](p *T) value {
	if p == nil {
		return value{}
	}
	return value{present: true, n: int64(*p)}
}

func boolean(b bool) value {
	if !b {
		return value{}
	}
	return value{present: true, n: 1}
}

func ptrBool(p *bool) value {
	if p == nil {
		return value{}
	}
	v := value{present: true}
	if *p {
		v.n = 1
	}
	return v
}

// envelopeFields are in every sandtrail category.
func envelopeFields() []*field {
	return []*field{
		newField("kind", tStr, func(v *view) value { return str(v.e.Kind) }),
		newField("session_id", tStr, func(v *view) value { return str(v.e.SessionID) }),
		newField("host", tStr, func(v *view) value { return str(v.e.Host) }),
		newField("source", tStr, func(v *view) value { return str(string(v.e.Source)) }),
	}
}

// procFields are in every sandtrail category: a file, net, pkg or limit
// event names its process in proc. parent.* are read from the Evaluator's
// process table, not from the event.
func procFields() []*field {
	p := procGet
	return append(append([]*field{
		newField("proc.pid", tInt, p(func(p *event.Proc) value { return num(p.Pid) })),
		newField("proc.ppid", tInt, p(func(p *event.Proc) value { return num(p.PPid) })),
		newField("proc.uid", tInt, p(func(p *event.Proc) value { return ptrNum(p.UID) })),
		newField("proc.euid", tInt, p(func(p *event.Proc) value { return ptrNum(p.EUID) })),
		newField("proc.auid", tInt, p(func(p *event.Proc) value { return ptrNum(p.AUID) })),
		newField("proc.comm", tStr, p(func(p *event.Proc) value { return str(p.Comm) })),
		newField("proc.exe", tStr, p(func(p *event.Proc) value { return str(p.Exe) })),
		newField("proc.exe_path", tStr, p(func(p *event.Proc) value { return str(p.ExePath) })),
		newField("proc.fileless", tBool, p(func(p *event.Proc) value { return boolean(p.Fileless) })),
		newField("proc.exe_sha256", tStr, p(func(p *event.Proc) value { return str(p.ExeSHA256) })),
		newField("proc.exe_sha256_missing", tStr, p(func(p *event.Proc) value { return str(p.ExeSHA256Missing) })),
		newField("proc.argv", tStrs, p(func(p *event.Proc) value { return strs(p.Argv) })),
		newField("proc.argv_truncated", tBool, p(func(p *event.Proc) value { return boolean(p.ArgvTruncated) })),
		newField("proc.argc", tInt, p(func(p *event.Proc) value { return ptrNum(p.Argc) })),
		newField("proc.argv_tail", tStrs, p(func(p *event.Proc) value { return strs(p.ArgvTail) })),
		newField("proc.argv_size", tInt, p(func(p *event.Proc) value { return num(p.ArgvSize) })),
		newField("proc.env", tStrs, p(func(p *event.Proc) value { return strs(p.Env) })),
		newField("proc.cwd", tStr, p(func(p *event.Proc) value { return str(p.Cwd) })),
		newField("proc.exit_code", tInt, p(func(p *event.Proc) value { return ptrNum(p.ExitCode) })),
		newField("proc.signal", tInt, p(func(p *event.Proc) value { return num(p.Signal) })),
		newField("proc.stdin_pipe", tInt, p(func(p *event.Proc) value { return num(p.StdinPipe) })),
		newField("proc.stdout_pipe", tInt, p(func(p *event.Proc) value { return num(p.StdoutPipe) })),
		newField("proc.errno", tStr, p(func(p *event.Proc) value { return str(p.Errno) })),
		newField("proc.syscall", tStr, p(func(p *event.Proc) value { return str(p.Syscall) })),
		newField("proc.ptrace.request", tStr, p(func(p *event.Proc) value {
			if p.Ptrace == nil {
				return value{}
			}
			return str(p.Ptrace.Request)
		})),
		newField("proc.ptrace.target_pid", tInt, p(func(p *event.Proc) value {
			if p.Ptrace == nil {
				return value{}
			}
			return num(p.Ptrace.TargetPid)
		})),
	}, lineageFields()...), parentFields()...)
}

// procGet reads a field of the event's proc; absent when it has none.
func procGet(get func(p *event.Proc) value) func(v *view) value {
	return func(v *view) value {
		if v.e.Proc == nil {
			return value{}
		}
		return get(v.e.Proc)
	}
}

// lineageFields are an exec's lineage as the collector recorded it:
// ancestors and pipe peers.
func lineageFields() []*field {
	p := procGet
	return []*field{
		newField("proc.ancestors.comm", tStrs, p(func(p *event.Proc) value {
			return strs(ancestorStrings(p.Ancestors, func(a event.Ancestor) string { return a.Comm }))
		})),
		newField("proc.ancestors.exe", tStrs, p(func(p *event.Proc) value {
			return strs(ancestorStrings(p.Ancestors, func(a event.Ancestor) string { return a.Exe }))
		})),
		newField("proc.stdin_from.pid", tInt, p(func(p *event.Proc) value { return peerPid(p.StdinFrom) })),
		newField("proc.stdin_from.comm", tStr, p(func(p *event.Proc) value { return peerComm(p.StdinFrom) })),
		newField("proc.stdin_from.argv", tStrs, p(func(p *event.Proc) value { return peerArgv(p.StdinFrom) })),
		newField("proc.stdout_to.pid", tInt, p(func(p *event.Proc) value { return peerPid(p.StdoutTo) })),
		newField("proc.stdout_to.comm", tStr, p(func(p *event.Proc) value { return peerComm(p.StdoutTo) })),
		newField("proc.stdout_to.argv", tStrs, p(func(p *event.Proc) value { return peerArgv(p.StdoutTo) })),
	}
}

// parentFields are read from the Evaluator's process table, not from the
// event.
func parentFields() []*field {
	return []*field{
		newField("proc.gained_root", tBool, func(v *view) value { return boolean(v.gainedRoot()) }),
		newField("parent.uid", tInt, func(v *view) value {
			if pe := v.parent(); pe != nil && pe.hasUID {
				return value{present: true, n: int64(pe.uid)}
			}
			return value{}
		}),
		newField("parent.exe", tStr, func(v *view) value {
			if pe := v.parent(); pe != nil {
				return str(pe.exe)
			}
			return value{}
		}),
		newField("parent.exe_path", tStr, func(v *view) value {
			if pe := v.parent(); pe != nil {
				return str(pe.exePath)
			}
			return value{}
		}),
		newField("parent.comm", tStr, func(v *view) value {
			if pe := v.parent(); pe != nil {
				return str(pe.comm)
			}
			return value{}
		}),
		newField("parent.argv", tStrs, func(v *view) value {
			if pe := v.parent(); pe != nil {
				return strs(pe.argv)
			}
			return value{}
		}),
	}
}

// agentFields are in every sandtrail category: what the session's
// session.start said of the agent, read from the Evaluator's session
// table.
func agentFields() []*field {
	return []*field{
		newField("agent.uid", tInt, func(v *view) value {
			if uid, ok := v.ev.agentUID(v.e.SessionID); ok {
				return value{present: true, n: int64(uid)}
			}
			return value{}
		}),
	}
}

func ancestorStrings(as []event.Ancestor, get func(event.Ancestor) string) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		if s := get(a); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func peerPid(p *event.PipePeer) value {
	if p == nil {
		return value{}
	}
	return num(p.Pid)
}

func peerComm(p *event.PipePeer) value {
	if p == nil {
		return value{}
	}
	return str(p.Comm)
}

func peerArgv(p *event.PipePeer) value {
	if p == nil {
		return value{}
	}
	return strs(p.Argv)
}

func fileFields() []*field {
	f := func(get func(f *event.File) value) func(v *view) value {
		return func(v *view) value {
			if v.e.File == nil {
				return value{}
			}
			return get(v.e.File)
		}
	}
	// file.op and file.path are required by the schema: present whenever
	// the sub-object is.
	return []*field{
		newField("file.op", tStr, f(func(f *event.File) value { return value{present: true, s: f.Op} })),
		newField("file.path", tStr, f(func(f *event.File) value { return value{present: true, s: f.Path} })),
		newField("file.new_path", tStr, f(func(f *event.File) value { return str(f.NewPath) })),
		newField("file.target", tStr, f(func(f *event.File) value { return str(f.Target) })),
		newField("file.symlink", tBool, f(func(f *event.File) value { return boolean(f.Symlink) })),
		newField("file.dir", tBool, f(func(f *event.File) value { return boolean(f.Dir) })),
		newField("file.flags", tInt, f(func(f *event.File) value { return num(f.Flags) })),
		newField("file.result", tInt, f(func(f *event.File) value { return ptrNum(f.Result) })),
		newField("file.errno", tStr, f(func(f *event.File) value { return str(f.Errno) })),
		newField("file.source", tStr, f(func(f *event.File) value { return str(f.Source) })),
		newField("file.fstype", tStr, f(func(f *event.File) value { return str(f.FSType) })),
		newField("file.count", tInt, f(func(f *event.File) value { return num(f.Count) })),
	}
}

func netGet(get func(n *event.Net) value) func(v *view) value {
	return func(v *view) value {
		if v.e.Net == nil {
			return value{}
		}
		return get(v.e.Net)
	}
}

func netFields() []*field {
	n := netGet
	return []*field{
		newField("net.op", tStr, n(func(n *event.Net) value { return value{present: true, s: n.Op} })),
		newField("net.proto", tStr, n(func(n *event.Net) value { return str(n.Proto) })),
		newField("net.src_ip", tStr, n(func(n *event.Net) value { return str(n.SrcIP) })),
		newField("net.src_port", tInt, n(func(n *event.Net) value { return num(n.SrcPort) })),
		newField("net.dst_ip", tStr, n(func(n *event.Net) value { return str(n.DstIP) })),
		newField("net.dst_port", tInt, n(func(n *event.Net) value { return num(n.DstPort) })),
		newField("net.domain", tStr, n(func(n *event.Net) value { return str(n.Domain) })),
		newField("net.bytes_out", tInt, n(func(n *event.Net) value { return num(n.BytesOut) })),
		newField("net.bytes_in", tInt, n(func(n *event.Net) value { return num(n.BytesIn) })),
		newField("net.duration_ms", tInt, n(func(n *event.Net) value { return num(n.DurationMS) })),
		newField("net.count", tInt, n(func(n *event.Net) value { return num(n.Count) })),
		newField("net.verdict", tStr, n(func(n *event.Net) value { return str(n.Verdict) })),
		newField("net.reason", tStr, n(func(n *event.Net) value { return str(n.Reason) })),
		newField("net.unix_path", tStr, n(func(n *event.Net) value { return str(n.UnixPath) })),
		newField("net.family", tStr, n(func(n *event.Net) value { return str(n.Family) })),
		newField("net.sock_type", tStr, n(func(n *event.Net) value { return str(n.SockType) })),
		newField("net.protocol", tInt, n(func(n *event.Net) value { return num(n.Protocol) })),
		newField("net.errno", tStr, n(func(n *event.Net) value { return str(n.Errno) })),
	}
}

func dnsFields() []*field {
	d := func(get func(d *event.DNS) value) func(v *view) value {
		return netGet(func(n *event.Net) value {
			if n.DNS == nil {
				return value{}
			}
			return get(n.DNS)
		})
	}
	return []*field{
		newField("net.dns.query", tStr, d(func(d *event.DNS) value { return value{present: true, s: d.Query} })),
		newField("net.dns.qtype", tStr, d(func(d *event.DNS) value { return value{present: true, s: d.QType} })),
		newField("net.dns.rcode", tStr, d(func(d *event.DNS) value { return str(d.RCode) })),
		newField("net.dns.answers.data", tStrs, func(v *view) value { return strs(v.answers(false)) }),
		newField("net.dns.answers.type", tStrs, func(v *view) value { return strs(v.answers(true)) }),
	}
}

func pkgFields() []*field {
	p := func(get func(p *event.Pkg) value) func(v *view) value {
		return func(v *view) value {
			if v.e.Pkg == nil {
				return value{}
			}
			return get(v.e.Pkg)
		}
	}
	return []*field{
		newField("pkg.manager", tStr, p(func(p *event.Pkg) value { return str(p.Manager) })),
		newField("pkg.ecosystem", tStr, p(func(p *event.Pkg) value { return value{present: true, s: p.Ecosystem} })),
		newField("pkg.name", tStr, p(func(p *event.Pkg) value { return value{present: true, s: p.Name} })),
		newField("pkg.requested", tStr, p(func(p *event.Pkg) value { return str(p.Requested) })),
		newField("pkg.resolved", tStr, p(func(p *event.Pkg) value { return str(p.Resolved) })),
		newField("pkg.source_url", tStr, p(func(p *event.Pkg) value { return str(p.SourceURL) })),
		newField("pkg.registry", tStr, p(func(p *event.Pkg) value { return str(p.Registry) })),
		newField("pkg.hash", tStr, p(func(p *event.Pkg) value { return str(p.Hash) })),
		newField("pkg.verified", tBool, p(func(p *event.Pkg) value { return ptrBool(p.Verified) })),
		newField("pkg.verdict", tStr, p(func(p *event.Pkg) value { return str(p.Verdict) })),
		newField("pkg.reason", tStr, p(func(p *event.Pkg) value { return str(p.Reason) })),
		newField("pkg.direct", tBool, p(func(p *event.Pkg) value { return ptrBool(p.Direct) })),
		newField("pkg.requested_by", tStr, p(func(p *event.Pkg) value { return str(p.RequestedBy) })),
		newField("pkg.purl", tStr, p(func(p *event.Pkg) value { return str(p.Purl) })),
		newField("pkg.client", tStr, p(func(p *event.Pkg) value { return str(p.Client) })),
		newField("pkg.cache", tStr, p(func(p *event.Pkg) value { return str(p.Cache) })),
		newField("pkg.outcome", tStr, p(func(p *event.Pkg) value { return str(p.Outcome) })),
		newField("pkg.rule", tStr, p(func(p *event.Pkg) value { return str(p.Rule) })),
		newField("pkg.signature", tStr, p(func(p *event.Pkg) value { return str(p.Signature) })),
		newField("pkg.bytes", tInt, p(func(p *event.Pkg) value { return num(p.Bytes) })),
		newField("pkg.latency_ms", tInt, p(func(p *event.Pkg) value { return num(p.LatencyMS) })),
		newField("pkg.metadata_stale", tBool, p(func(p *event.Pkg) value { return boolean(p.MetadataStale) })),
		newField("pkg.provenance", tBool, p(func(p *event.Pkg) value { return ptrBool(p.Provenance) })),
		newField("pkg.provenance_lost", tBool, p(func(p *event.Pkg) value { return boolean(p.ProvenanceLost) })),
		newField("pkg.install_scripts", tStrs, p(func(p *event.Pkg) value { return strs(p.InstallScripts) })),
		newField("pkg.manager_pid", tInt, p(func(p *event.Pkg) value { return num(p.ManagerPid) })),
	}
}

func sessionFields() []*field {
	s := func(get func(s *event.Session) value) func(v *view) value {
		return func(v *view) value {
			if v.e.Session == nil {
				return value{}
			}
			return get(v.e.Session)
		}
	}
	return []*field{
		newField("session.op", tStr, s(func(s *event.Session) value { return value{present: true, s: s.Op} })),
		newField("session.tenant", tStr, s(func(s *event.Session) value { return str(s.Tenant) })),
		newField("session.user", tStr, s(func(s *event.Session) value { return str(s.User) })),
		newField("session.template", tStr, s(func(s *event.Session) value { return str(s.Template) })),
		newField("session.image", tStr, s(func(s *event.Session) value { return str(s.Image) })),
		newField("session.image_digest", tStr, s(func(s *event.Session) value { return str(s.ImageDigest) })),
		newField("session.host", tStr, s(func(s *event.Session) value { return str(s.Host) })),
		newField("session.reason", tStr, s(func(s *event.Session) value { return str(s.Reason) })),
		newField("session.actor", tStr, s(func(s *event.Session) value { return str(s.Actor) })),
		newField("session.exit_status", tInt, s(func(s *event.Session) value { return ptrNum(s.ExitStatus) })),
		newField("session.fs_state", tStr, s(func(s *event.Session) value { return str(s.FSState) })),
	}
}

func limitFields() []*field {
	l := func(get func(l *event.Limit) value) func(v *view) value {
		return func(v *view) value {
			if v.e.Limit == nil {
				return value{}
			}
			return get(v.e.Limit)
		}
	}
	return []*field{
		newField("limit.type", tStr, l(func(l *event.Limit) value { return value{present: true, s: l.Type} })),
		newField("limit.measured", tInt, l(func(l *event.Limit) value { return value{present: true, n: l.Measured} })),
		newField("limit.configured", tInt, l(func(l *event.Limit) value { return value{present: true, n: l.Configured} })),
		newField("limit.unit", tStr, l(func(l *event.Limit) value { return str(l.Unit) })),
		newField("limit.action", tStr, l(func(l *event.Limit) value { return value{present: true, s: l.Action} })),
	}
}

func toolFields() []*field {
	t := func(get func(t *event.Tool) value) func(v *view) value {
		return func(v *view) value {
			if v.e.Tool == nil {
				return value{}
			}
			return get(v.e.Tool)
		}
	}
	return []*field{
		newField("tool.name", tStr, t(func(t *event.Tool) value { return value{present: true, s: t.Name} })),
		newField("tool.input_summary", tStr, t(func(t *event.Tool) value { return str(t.InputSummary) })),
		newField("tool.output_summary", tStr, t(func(t *event.Tool) value { return str(t.OutputSummary) })),
		newField("tool.status", tStr, t(func(t *event.Tool) value { return str(t.Status) })),
		newField("tool.duration_ms", tInt, t(func(t *event.Tool) value { return num(t.DurationMS) })),
	}
}

// linuxProcFields are the SigmaHQ process fields of the linux categories,
// read from the event's proc and, for Parent* and for what a file or net
// event's proc does not name, from the process table.
func linuxProcFields() []*field {
	p := func(get func(v *view, p *event.Proc) value) func(v *view) value {
		return func(v *view) value {
			if v.e.Proc == nil {
				return value{}
			}
			return get(v, v.e.Proc)
		}
	}
	return []*field{
		newField("Image", tStr, p(func(v *view, _ *event.Proc) value { return str(v.image()) })),
		newField("CommandLine", tStr, p(func(v *view, _ *event.Proc) value { return str(v.commandLine()) })),
		newField("CurrentDirectory", tStr, p(func(v *view, _ *event.Proc) value { return str(v.cwd()) })),
		newField("User", tStr, p(func(v *view, p *event.Proc) value {
			if p.UID == nil {
				return value{}
			}
			return str(v.user(*p.UID))
		})),
		newField("LogonId", tInt, p(func(_ *view, p *event.Proc) value { return ptrNum(p.AUID) })),
		newField("ProcessId", tInt, p(func(_ *view, p *event.Proc) value { return num(p.Pid) })),
		newField("ParentProcessId", tInt, func(v *view) value { return num(v.ppid()) }),
		newField("ParentImage", tStr, func(v *view) value {
			if pe := v.parent(); pe != nil {
				return str(image(pe.exePath, pe.exe))
			}
			return value{}
		}),
		newField("ParentCommandLine", tStr, func(v *view) value {
			if pe := v.parent(); pe != nil {
				return str(pe.commandLine())
			}
			return value{}
		}),
	}
}

// image is SigmaHQ's Image: the path the kernel executed, else the name
// passed to execve.
func image(exePath, exe string) string {
	if exePath != "" {
		return exePath
	}
	return exe
}

func linuxFileFields() []*field {
	return []*field{
		newField("TargetFilename", tStr, func(v *view) value {
			f := v.e.File
			if f == nil {
				return value{}
			}
			if f.Op == "rename" && f.NewPath != "" {
				return str(f.NewPath)
			}
			return str(f.Path)
		}),
	}
}

func linuxNetFields() []*field {
	n := netGet
	return []*field{
		newField("DestinationIp", tStr, n(func(n *event.Net) value { return str(n.DstIP) })),
		newField("DestinationPort", tInt, n(func(n *event.Net) value { return num(n.DstPort) })),
		newField("DestinationHostname", tStr, n(func(n *event.Net) value { return str(n.Domain) })),
		newField("SourceIp", tStr, n(func(n *event.Net) value { return str(n.SrcIP) })),
		newField("SourcePort", tInt, n(func(n *event.Net) value { return num(n.SrcPort) })),
		newField("Protocol", tStr, n(func(n *event.Net) value { return str(n.Proto) })),
		newField("Initiated", tBool, n(func(n *event.Net) value {
			// A connect is initiated by the process; an accept is not.
			return value{present: true, n: b2i(n.Op != "accept")}
		})),
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// kindsOf returns the kinds of event.Kinds that begin with prefix, less
// the ones listed in except.
func kindsOf(prefix string, except ...string) []string {
	var out []string
	for _, k := range event.Kinds {
		if strings.HasPrefix(k, prefix) && !contains(except, k) {
			out = append(out, k)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func newCategory(product, name, prefix string, kinds []string, groups ...[]*field) *category {
	c := &category{product: product, name: name, prefix: prefix, kinds: kinds, fields: map[string]*field{}}
	for _, g := range groups {
		for _, f := range g {
			c.fields[f.name] = f
			c.order = append(c.order, f.name)
		}
	}
	return c
}

// ProductSandtrail and ProductLinux are the logsource products of the
// supported categories.
const (
	ProductSandtrail = "sandtrail"
	ProductLinux     = "linux"
)

// categories lists every supported logsource, in the order of
// docs/sigma.md.
var categories = func() []*category {
	env, proc := append(envelopeFields(), agentFields()...), procFields()
	file, net, dns := fileFields(), netFields(), dnsFields()
	lproc := linuxProcFields()
	return []*category{
		newCategory(ProductSandtrail, "process", "process.", kindsOf("process."), env, proc),
		newCategory(ProductSandtrail, "file", "file.", kindsOf("file."), env, proc, file),
		newCategory(ProductSandtrail, "network", "net.", kindsOf("net.", event.KindNetDNS), env, proc, net),
		newCategory(ProductSandtrail, "dns", "", []string{event.KindNetDNS}, env, proc, net, dns),
		newCategory(ProductSandtrail, "package", "pkg.", kindsOf("pkg."), env, proc, pkgFields()),
		newCategory(ProductSandtrail, "session", "session.", kindsOf("session."), env, proc, sessionFields()),
		newCategory(ProductSandtrail, "limit", "limit.", kindsOf("limit."), env, proc, limitFields()),
		newCategory(ProductSandtrail, "tool", "tool.", kindsOf("tool."), env, proc, toolFields()),
		newCategory(ProductLinux, "process_creation", "", []string{event.KindExec}, lproc),
		newCategory(ProductLinux, "file_event", "",
			[]string{event.KindFileCreate, event.KindFileWrite, event.KindFileRename, event.KindFileLink},
			lproc, linuxFileFields()),
		newCategory(ProductLinux, "network_connection", "",
			[]string{event.KindNetConnect, event.KindNetAccept}, lproc, linuxNetFields()),
	}
}()

func findCategory(product, name string) *category {
	for _, c := range categories {
		if c.product == product && c.name == name {
			return c
		}
	}
	return nil
}

// formatInt is the decimal text of an integer field, for string matching.
func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
