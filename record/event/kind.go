package event

import "strings"

// The event kinds: the values of Event.Kind that producers write, one per
// row of the "Kinds in use" table in docs/schema.md (a test keeps the two in
// line). Every producer and consumer names a kind by these constants; this
// package is their one home on the Go side, as collector/bpf/common.h's enum
// event_kind is on the kernel side.
//
// A name is Kind, the category and the op, except that the process
// category is implied, as in common.h (KindExec is "process.exec"), and
// the collector category is too: "collector.loss" is KindLoss, since every
// producer that drops events writes it, and "collector.capabilities" is
// KindCapabilities.
//
// The constants are untyped strings and Event.Kind stays a string: the set
// is open (readers must tolerate kinds they don't know, docs/schema.md), and
// a reader compares, indexes and prints the kinds it reads from the journal
// as the strings they are.
const (
	KindExec       = "process.exec"
	KindExecFailed = "process.exec_failed"
	KindFork       = "process.fork"
	KindExit       = "process.exit"
	// KindPtrace is a ptrace request that starts tracing (attach, seize,
	// traceme), from the kernel.
	KindPtrace = "process.ptrace"
	// KindDenied is a syscall that the session's seccomp filter refused.
	KindDenied = "process.denied"
	// KindExeHash is the sha256 of the file a process executed, for an
	// exec the collector sent before its hash was done
	// (proc.exe_sha256_missing "pending").
	KindExeHash = "process.exe_hash"

	KindFileRead     = "file.read"
	KindFileWrite    = "file.write"
	KindFileCreate   = "file.create"
	KindFileDelete   = "file.delete"
	KindFileRename   = "file.rename"
	KindFileMount    = "file.mount"
	KindFileUmount   = "file.umount"
	KindFileTruncate = "file.truncate"
	KindFileChmod    = "file.chmod"
	KindFileLink     = "file.link"

	// KindNetConnect is also the kind lost for dropped net.send records,
	// which the kernel sends as connect records.
	KindNetConnect = "net.connect"
	KindNetSend    = "net.send"
	KindNetClose   = "net.close"
	KindNetListen  = "net.listen"
	KindNetAccept  = "net.accept"
	KindNetDNS     = "net.dns"
	// KindNetSocket is a socket(2) of an unusual family or type (packet,
	// raw), refused ones too.
	KindNetSocket = "net.socket"

	KindPkgInstall = "pkg.install"
	KindPkgFetch   = "pkg.fetch"
	KindPkgFilter  = "pkg.filter"
	KindPkgBlocked = "pkg.blocked"

	KindToolInvoke = "tool.invoke"
	KindModelIO    = "model.io"

	KindSessionCreate    = "session.create"
	KindSessionStart     = "session.start"
	KindSessionPause     = "session.pause"
	KindSessionResume    = "session.resume"
	KindSessionTerminate = "session.terminate"
	KindSessionCleanup   = "session.cleanup"

	KindLimitHit = "limit.hit"
	// KindAlert is the one kind without an op.
	KindAlert = "alert"
	// KindLoss counts events that a producer dropped instead of blocking.
	KindLoss = "collector.loss"
	// KindCapabilities is what the kernel collector can see and enforce on
	// the kernel it runs on (its Kernel payload), written once when it
	// starts, outside every session.
	KindCapabilities = "collector.capabilities"
	// KindJournalRecovered is written by the journal after it cut a torn
	// tail at start-up.
	KindJournalRecovered = "journal.recovered"

	// KindRetentionPrune is written after the retention policy pruned
	// entries past the hot window (its Retention payload names the
	// sessions, the counts and the seq ranges), outside every session.
	KindRetentionPrune = "retention.prune"
	// KindRetentionHold places a legal hold on a session: retention never
	// prunes it until a KindRetentionRelease. The set of holds is derived
	// from these events, so no file decides it.
	KindRetentionHold    = "retention.hold"
	KindRetentionRelease = "retention.release"
	// KindInvestigateUnseal is written before an investigator's sealed
	// tool I/O is revealed (sandtrail investigate unseal): who, which
	// events, why.
	KindInvestigateUnseal = "investigate.unseal"
)

// Kinds lists every kind above, in the order of docs/schema.md.
var Kinds = []string{
	KindExec, KindExecFailed, KindFork, KindExit, KindPtrace, KindDenied, KindExeHash,
	KindFileRead, KindFileWrite, KindFileCreate, KindFileDelete, KindFileRename,
	KindFileMount, KindFileUmount, KindFileTruncate, KindFileChmod, KindFileLink,
	KindNetConnect, KindNetSend, KindNetClose, KindNetListen, KindNetAccept, KindNetDNS, KindNetSocket,
	KindPkgInstall, KindPkgFetch, KindPkgFilter, KindPkgBlocked,
	KindToolInvoke, KindModelIO,
	KindSessionCreate, KindSessionStart, KindSessionPause, KindSessionResume, KindSessionTerminate, KindSessionCleanup,
	KindLimitHit, KindAlert, KindLoss, KindCapabilities, KindJournalRecovered,
	KindRetentionPrune, KindRetentionHold, KindRetentionRelease,
	KindInvestigateUnseal,
}

// FileKind returns the kind of the file operation op, an event.File.Op:
// FileKind("read") is KindFileRead. It returns "" for an op that has no kind
// in Kinds. It does not allocate, so the collector calls it per event.
func FileKind(op string) string { return opKinds["file"][op] }

// SessionKind returns the kind of the session lifecycle step op, an
// event.Session.Op: SessionKind("start") is KindSessionStart. It returns ""
// for an op that has no kind in Kinds.
func SessionKind(op string) string { return opKinds["session"][op] }

// opKinds maps a category and an op to the kind in Kinds.
var opKinds = func() map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, k := range Kinds {
		c, op, ok := strings.Cut(k, ".")
		if !ok {
			continue
		}
		if m[c] == nil {
			m[c] = map[string]string{}
		}
		m[c][op] = k
	}
	return m
}()
