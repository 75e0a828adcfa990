package journal

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/sandtrail/sandtrail/record/event"
)

// testKey returns a signer and the matching verifiers.
func testKey(t testing.TB, name string) (note.Signer, note.Verifiers) {
	t.Helper()
	skey, vkey, err := GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, note.VerifierList(v)
}

// genEvents returns n realistic events of several kinds, deterministic for
// a seed. One in every 500 is a session.terminate.
func genEvents(n int, seed uint64) []*event.Event {
	r := rand.New(rand.NewPCG(seed, 42))
	base := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	out := make([]*event.Event, n)
	for i := range out {
		sess := fmt.Sprintf("sess-%04d", r.IntN(20))
		ev := &event.Event{
			TS:        base.Add(time.Duration(i) * time.Millisecond),
			SessionID: sess,
			Host:      "sandbox-7",
			EventID:   fmt.Sprintf("ev-%d-%d", seed, i),
		}
		pid := int32(1000 + r.IntN(30000))
		switch k := r.IntN(10); {
		case i%500 == 499:
			ev.Kind, ev.Source = event.KindSessionTerminate, event.SourceSession
			ev.Session = &event.Session{Op: "terminate", Reason: "normal", ExitStatus: event.I32(0), FSState: "deleted"}
		case k < 3:
			ev.Kind, ev.Source = event.KindExec, event.SourceKernel
			ev.Proc = &event.Proc{Pid: pid, PPid: pid - 1, UID: event.U32(1000), Comm: "python3",
				Exe: "/usr/bin/python3.11", Argv: []string{"python3", "-m", "pip", "install", fmt.Sprintf("requests==2.%d.0", r.IntN(32))},
				Cwd: "/home/agent/work", CgroupID: 4242}
		case k < 5:
			ev.Kind, ev.Source = event.KindPkgInstall, event.SourceShim
			name := []string{"lodash", "left-pad", "express", "react", "chalk"}[r.IntN(5)]
			ev.Pkg = &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: name, Requested: "^4.17.0",
				Resolved: fmt.Sprintf("4.17.%d", r.IntN(22)), SourceURL: "https://registry.npmjs.org/" + name + "/-/" + name + "-4.17.21.tgz",
				Hash: "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==", Verified: event.Bool(true), Verdict: "allow", Direct: event.Bool(r.IntN(2) == 0)}
		case k < 7:
			ev.Kind, ev.Source = event.KindNetConnect, event.SourceKernel
			ev.Proc = &event.Proc{Pid: pid, Comm: "node"}
			ev.Net = &event.Net{Op: "connect", Proto: "tcp", SrcIP: "10.0.3.2", SrcPort: uint16(30000 + r.IntN(30000)), DstIP: "104.16.3.35", DstPort: 443, Verdict: "allowed"}
		case k < 9:
			ev.Kind, ev.Source = event.KindFileWrite, event.SourceKernel
			ev.Proc = &event.Proc{Pid: pid, Comm: "node"}
			ev.File = &event.File{Op: "write", Path: fmt.Sprintf("/home/agent/work/node_modules/.pkg-%d/index.js", r.IntN(1000)), Result: event.I64(int64(r.IntN(65536)))}
		default:
			ev.Kind, ev.Source = event.KindToolInvoke, event.SourceAPI
			ev.Tool = &event.Tool{Name: "bash", Status: "ok", DurationMS: int64(r.IntN(5000)), IO: event.IO{InputSummary: "npm install lodash", OutputSummary: "added 1 package in 2s"}}
		}
		out[i] = ev
	}
	return out
}

// copyDir copies a journal directory (flat files and checkpoints/).
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// frameLoc is where an entry's frame sits.
type frameLoc struct {
	path   string
	offset int64
	length int64 // the whole frame
}

// frameLocs returns the location of every entry's frame, by seq.
func frameLocs(t testing.TB, dir string) []frameLoc {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []frameLoc
	for _, s := range segs {
		r, err := openSegmentReader(s.path, s.first)
		if err != nil {
			t.Fatal(err)
		}
		for {
			off := r.off
			p, err := r.next()
			if err != nil {
				break
			}
			out = append(out, frameLoc{path: s.path, offset: off, length: frameHeaderSize + int64(len(p))})
		}
		r.Close()
	}
	return out
}

func mustReadFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWriteFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pruneRecorded journals the record of pruning seqs (a retention.prune
// entry naming them, as the retention policy writes one) and prunes them.
func pruneRecorded(t testing.TB, j *Journal, seqs ...uint64) (PruneResult, error) {
	t.Helper()
	sorted := slices.Compact(slices.Sorted(slices.Values(seqs)))
	rec := &event.Event{V: event.SchemaVersion, TS: time.Unix(1700000000, 0), Kind: event.KindRetentionPrune, Source: event.SourceJournal,
		Retention: &event.Retention{Op: event.RetentionPrune, Entries: uint64(len(sorted)), Ranges: event.SeqRanges(sorted)}}
	if err := j.Append(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return j.Prune(context.Background(), seqs, []uint64{rec.Seq})
}
