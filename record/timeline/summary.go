package timeline

import (
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/journal"
	"github.com/sandtrail/sandtrail/record/render"
)

// Run is a session that has ended, as its launcher reports it.
type Run struct {
	SessionID, HostedBy, Reason, StartError, Workdir, Keep string
	ExitStatus                                             *int32
	Started, Ended                                         time.Time
	// From is the seq the session began at.
	From uint64
	// KernelFrom is the seq from which the host's collector.capabilities
	// is looked for in the journal: the session's own start, or where a
	// host in this process opened the journal.
	KernelFrom uint64
}

// JournalSummary is the verification of the journal from the session on.
type JournalSummary struct {
	Dir       string `json:"dir"`
	Status    string `json:"status"`
	Entries   uint64 `json:"entries"`
	Covered   uint64 `json:"covered"`
	Uncovered uint64 `json:"uncovered"`
	// VerifiedFrom is the seq verification began at (journal.VerifyFrom).
	VerifiedFrom uint64 `json:"verified_from"`
	Error        string `json:"error,omitempty"`
}

// Summary is what `sandtrail run` prints when the session has ended.
type Summary struct {
	SessionID  string            `json:"session_id"`
	HostedBy   string            `json:"hosted_by"`
	Reason     string            `json:"reason"`
	ExitStatus *int32            `json:"exit_status,omitempty"`
	StartError string            `json:"start_error,omitempty"`
	Duration   string            `json:"duration"`
	DurationMS int64             `json:"duration_ms"`
	Events     uint64            `json:"events"`
	ByCategory map[string]uint64 `json:"by_category"`
	Alerts     []string          `json:"alerts"`
	Limits     []string          `json:"limit_hits"`
	// Lost sums the session's own loss events; LostHostWide the host-wide
	// ones (no session) journaled while it ran.
	Lost         uint64         `json:"lost"`
	LostHostWide uint64         `json:"lost_host_wide"`
	Workdir      string         `json:"workdir"`
	Keep         string         `json:"keep"`
	Snapshot     string         `json:"snapshot_sha256,omitempty"`
	Journal      JournalSummary `json:"journal"`
	Errors       []string       `json:"errors,omitempty"`
	// Kernel is what the kernel collector of the session's host could see
	// and enforce (its newest collector.capabilities), when it is known.
	Kernel *event.Kernel `json:"kernel,omitempty"`
}

// Sources are where Summarize reads what the journal alone does not say.
type Sources struct {
	// Verifiers returns the checkpoint verifier keys.
	Verifiers func() (note.Verifiers, error)
	// Kernel, when set, returns the host's kernel capabilities when the
	// journal from KernelFrom holds none (a daemon's, journaled when it
	// started, from the index).
	Kernel func() (*event.Kernel, error)
}

// Summarize reads the session's events back from the journal in
// journalDir (from the seq the session began at; stored entries decode
// with event.DecodeStored) and verifies the journal from the newest
// checkpoint before that seq (journal.VerifyFrom). What it cannot read is
// said in the summary's Errors and Journal.Error, never returned.
func Summarize(journalDir string, r Run, src Sources) *Summary {
	d := r.Ended.Sub(r.Started)
	sum := &Summary{SessionID: r.SessionID, HostedBy: r.HostedBy, Reason: r.Reason, ExitStatus: r.ExitStatus,
		StartError: r.StartError, Duration: d.Round(time.Millisecond).String(), DurationMS: d.Milliseconds(),
		ByCategory: map[string]uint64{}, Alerts: []string{}, Limits: []string{}, Workdir: r.Workdir, Keep: r.Keep,
		Journal: JournalSummary{Dir: journalDir}}
	err := journal.Scan(journalDir, min(r.KernelFrom, r.From), func(seq uint64, raw []byte) error {
		if e, err := event.DecodeStored(raw); err == nil {
			sum.add(seq, r, e)
		}
		return nil
	})
	if err != nil {
		sum.Errors = append(sum.Errors, "reading the journal: "+err.Error())
	}
	if sum.Kernel == nil && src.Kernel != nil {
		if sum.Kernel, err = src.Kernel(); err != nil {
			sum.Errors = append(sum.Errors, "reading the daemon's kernel capabilities: "+err.Error())
		}
	}
	sum.verify(journalDir, r.From, src.Verifiers)
	return sum
}

// add counts the journal's entry at seq: the host's capabilities, or one of
// the session's events, or a host-wide loss while it ran.
func (sum *Summary) add(seq uint64, r Run, e *event.Event) {
	if e.Kind == event.KindCapabilities && e.Kernel != nil {
		sum.Kernel = e.Kernel
		return
	}
	if seq < r.From {
		return
	}
	if e.SessionID != r.SessionID && !(e.SessionID == "" && e.Loss != nil) {
		return
	}
	sum.Events++
	sum.ByCategory[e.Category()]++
	switch {
	case e.Alert != nil:
		sum.Alerts = append(sum.Alerts, fmt.Sprintf("%s %s: %s", e.Alert.Level, e.Alert.RuleID, e.Alert.Title))
	case e.Limit != nil:
		sum.Limits = append(sum.Limits, render.Limit(e))
	case e.Loss != nil && e.SessionID == "":
		sum.LostHostWide += e.Loss.Count
	case e.Loss != nil:
		sum.Lost += e.Loss.Count
	case e.Session != nil && e.Session.Op == "cleanup":
		sum.Snapshot = e.Session.SnapshotSHA256
	}
}

// verify verifies the journal from the newest checkpoint before seq from.
func (sum *Summary) verify(journalDir string, from uint64, verifiers func() (note.Verifiers, error)) {
	sum.Journal = VerifyJournal(journalDir, from, verifiers)
}

// VerifyJournal verifies the journal in journalDir from the newest
// checkpoint before seq from (journal.VerifyFrom) with the verifiers it
// is given. What fails is said in the summary's Status ("error" when
// nothing could be verified) and Error, never returned.
func VerifyJournal(journalDir string, from uint64, verifiers func() (note.Verifiers, error)) JournalSummary {
	js := JournalSummary{Dir: journalDir}
	vs, err := verifiers()
	if err != nil {
		js.Status, js.Error = "error", err.Error()
		return js
	}
	rep, err := journal.VerifyFrom(journalDir, vs, from)
	if rep != nil {
		js.Status, js.Entries, js.VerifiedFrom = string(rep.Status), rep.Entries, rep.From
		js.Covered, js.Uncovered = rep.Covered, rep.Uncovered
	}
	if err != nil {
		if rep == nil {
			js.Status = "error"
		}
		js.Error = err.Error()
	}
	return js
}
