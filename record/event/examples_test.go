package event_test

import (
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// exampleTS has nanoseconds, so that examples show and tests check that they
// survive encoding.
var exampleTS = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

const exampleSession = "s-01JQ7ZK3V9TQ4M2X8C5N6B7D0E"

func base(kind string, src event.Source, seq uint64) *event.Event {
	return &event.Event{
		V:         event.SchemaVersion,
		Seq:       seq,
		TS:        exampleTS.Add(time.Duration(seq) * time.Millisecond),
		SessionID: exampleSession,
		Host:      "worker-3",
		Kind:      kind,
		Source:    src,
	}
}

func agentProc(pid int32, comm, exe string, argv ...string) *event.Proc {
	return &event.Proc{
		Pid: pid, PPid: 4101, UID: event.U32(1000), EUID: event.U32(1000), AUID: event.U32(1000),
		Comm: comm, Exe: exe, Argv: argv, Cwd: "/home/agent/app",
		CgroupID: 7214,
	}
}

// examples returns one complete, realistic event per kind in use.
func examples() map[string]*event.Event {
	m := map[string]*event.Event{}
	add := func(e *event.Event) { m[e.Kind] = e }

	e := base(event.KindExec, event.SourceKernel, 120)
	e.Proc = agentProc(4242, "npm", "/usr/bin/node", "npm", "install", "lodash@^4.17.0")
	e.Proc.StartTS = exampleTS.Add(119 * time.Millisecond)
	e.Proc.StdoutPipe = 88412
	add(e)

	e = base(event.KindExecFailed, event.SourceKernel, 121)
	e.Proc = agentProc(4243, "bash", "/usr/bin/bash")
	e.Proc.Exe = "/tmp/x/payload"
	e.Proc.Argv = []string{"/tmp/x/payload", "--fast"}
	e.Proc.Errno = "EACCES"
	add(e)

	e = base(event.KindPtrace, event.SourceKernel, 124)
	e.Proc = &event.Proc{Pid: 4245, PPid: 4242, UID: event.U32(1000), Comm: "gdb", CgroupID: 7214,
		Errno: "EPERM", Ptrace: &event.Ptrace{Request: "attach", TargetPid: 4101}}
	add(e)

	e = base(event.KindDenied, event.SourceKernel, 121)
	e.Proc = &event.Proc{Pid: 4245, UID: event.U32(1000), Comm: "python3", CgroupID: 7214,
		Syscall: "io_uring_setup", Errno: "EPERM"}
	add(e)

	e = base(event.KindExeHash, event.SourceKernel, 121)
	e.Proc = &event.Proc{Pid: 4243, PPid: 4242, Comm: "node", Exe: "/usr/bin/node", ExePath: "/usr/bin/node",
		ExeDev: 65024, ExeIno: 1835521, ExeSHA256: "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef",
		StartTS: exampleTS.Add(110 * time.Millisecond), CgroupID: 7214}
	add(e)

	e = base(event.KindFork, event.SourceKernel, 122)
	e.Proc = &event.Proc{Pid: 4244, PPid: 4242, UID: event.U32(1000), Comm: "npm", CgroupID: 7214,
		StartTS: exampleTS.Add(121 * time.Millisecond)}
	add(e)

	e = base(event.KindExit, event.SourceKernel, 123)
	e.Proc = &event.Proc{Pid: 4242, PPid: 4101, Comm: "npm", ExitCode: event.I32(0), CgroupID: 7214,
		StartTS: exampleTS.Add(119 * time.Millisecond)}
	add(e)

	fileOp := func(kind string, seq uint64, f *event.File) {
		_, op, _ := strings.Cut(kind, ".")
		e := base(kind, event.SourceKernel, seq)
		f.Op = op
		e.File = f
		e.Proc = &event.Proc{Pid: 4244, Comm: "node", CgroupID: 7214}
		add(e)
	}
	fileOp(event.KindFileRead, 130, &event.File{Path: "/home/agent/.npmrc", Flags: 0o100000, Result: event.I64(3)})
	fileOp(event.KindFileWrite, 131, &event.File{Path: "/home/agent/app/node_modules/lodash/package.json", Flags: 0o101101, Result: event.I64(5)})
	fileOp(event.KindFileCreate, 132, &event.File{Path: "/home/agent/app/node_modules/lodash/index.js", Flags: 0o100301, Result: event.I64(6)})
	fileOp(event.KindFileDelete, 133, &event.File{Path: "/home/agent/app/node_modules/.staging/lodash-1a2b", Result: event.I64(0)})
	fileOp(event.KindFileRename, 134, &event.File{Path: "/home/agent/app/node_modules/.staging/lodash-1a2b", NewPath: "/home/agent/app/node_modules/lodash", Result: event.I64(0)})
	fileOp(event.KindFileMount, 135, &event.File{Path: "/mnt/host", Flags: 0x1000, Errno: "EPERM"})
	fileOp(event.KindFileUmount, 138, &event.File{Path: "/mnt/host", Flags: 0x2, Errno: "EPERM"})
	fileOp(event.KindFileTruncate, 136, &event.File{Path: "/home/agent/.bash_history", Result: event.I64(0)})
	fileOp(event.KindFileChmod, 137, &event.File{Path: "/tmp/x/payload", Flags: 0o755, Result: event.I64(0)})
	fileOp(event.KindFileLink, 139, &event.File{Path: "/home/agent/.cache/s", Target: "/etc/shadow", Symlink: true, Result: event.I64(0)})

	netOp := func(kind string, seq uint64, n *event.Net) {
		_, op, _ := strings.Cut(kind, ".")
		e := base(kind, event.SourceKernel, seq)
		n.Op = op
		e.Net = n
		e.Proc = &event.Proc{Pid: 4244, Comm: "node", CgroupID: 7214}
		add(e)
	}
	netOp(event.KindNetConnect, 140, &event.Net{Proto: "tcp", SrcIP: "10.88.0.7", SrcPort: 41234, DstIP: "10.88.0.1", DstPort: 4873, Domain: "mirror.sandtrail.internal", Verdict: "allowed"})
	netOp(event.KindNetSend, 141, &event.Net{Proto: "tcp", SrcIP: "10.88.0.7", SrcPort: 41234, DstIP: "10.88.0.1", DstPort: 4873, BytesOut: 812})
	netOp(event.KindNetClose, 142, &event.Net{Proto: "tcp", SrcIP: "10.88.0.7", SrcPort: 41234, DstIP: "10.88.0.1", DstPort: 4873, BytesOut: 812, BytesIn: 318455})
	netOp(event.KindNetListen, 143, &event.Net{Proto: "tcp", SrcIP: "0.0.0.0", SrcPort: 8080})
	netOp(event.KindNetAccept, 144, &event.Net{Proto: "tcp", SrcIP: "10.88.0.7", SrcPort: 8080, DstIP: "10.88.0.9", DstPort: 50522})
	netOp(event.KindNetSocket, 146, &event.Net{Family: "packet", SockType: "raw", Protocol: 768, Verdict: "allowed", Errno: "EPERM"})
	netOp(event.KindNetDNS, 145, &event.Net{Proto: "udp", DstIP: "10.88.0.1", DstPort: 53, Verdict: "allowed",
		DNS: &event.DNS{Query: "registry.npmjs.org.", QType: "A", RCode: "NOERROR", Answers: []event.DNSAnswer{
			{Type: "CNAME", Data: "registry.npmjs.org.cdn.cloudflare.net.", TTL: 300},
			{Type: "A", Data: "104.16.2.35", TTL: 300},
		}}})

	e = base(event.KindPkgInstall, event.SourceShim, 150)
	e.EventID = "shim-4242-0001"
	e.Proc = &event.Proc{Pid: 4242, Comm: "npm", Argv: []string{"npm", "install", "lodash@^4.17.0"}}
	e.Pkg = &event.Pkg{Manager: "npm", Ecosystem: "npm", Name: "lodash", Requested: "^4.17.0", Resolved: "4.17.21",
		Registry: "http://10.88.0.1:4873/npm/", Hash: "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
		SourceURL: "http://10.88.0.1:4873/npm/lodash/-/lodash-4.17.21.tgz",
		Direct:    event.Bool(true), Purl: "pkg:npm/lodash@4.17.21", ManagerPid: 4243}
	add(e)

	e = base(event.KindPkgBlocked, event.SourceShim, 153)
	e.Proc = &event.Proc{Pid: 4250, Comm: "pip", Argv: []string{"pip", "install", "https://example.invalid/x.whl"}}
	e.Pkg = &event.Pkg{Manager: "pip", Ecosystem: "pypi", Name: "", Requested: "https://example.invalid/x.whl",
		SourceURL: "https://example.invalid/x.whl", Verdict: "block", Rule: "on_unknown_source",
		Reason: "unknown source: https://example.invalid/x.whl is not under an approved pypi registry, and direct URLs are not allowed"}
	add(e)

	e = base(event.KindPkgFetch, event.SourceMirror, 151)
	e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "lodash", Resolved: "4.17.21",
		SourceURL: "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz", Registry: "https://registry.npmjs.org/",
		Hash:     "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
		Verified: event.Bool(true), Verdict: "allow", Purl: "pkg:npm/lodash@4.17.21", Client: "10.88.0.7:41234", Cache: "miss",
		Outcome: "served", Bytes: 318961, LatencyMS: 84, Provenance: event.Bool(false), InstallScripts: []string{"postinstall"}}
	add(e)

	e = base(event.KindPkgFilter, event.SourceMirror, 152)
	e.Pkg = &event.Pkg{Ecosystem: "npm", Name: "axios", Registry: "https://registry.npmjs.org/", Client: "10.88.0.7:41236",
		Removed: []event.PkgRemoval{{Version: "1.14.1", Outcome: "cooldown", Rule: "cooldown.min_age",
			Reason: "axios@1.14.1 was published 2026-03-14T06:02:11Z (3h24m ago), inside the 48h cooldown"}}}
	add(e)

	e = base(event.KindToolInvoke, event.SourceAPI, 160)
	e.Tool = &event.Tool{Name: "bash", Status: "ok", DurationMS: 2140, IO: event.IO{InputSummary: "npm install lodash@^4.17.0", OutputSummary: "added 1 package in 2s", SealedRef: "sha256:4c1f0d6a8e2b39f7c5d1e0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1", Verbosity: "full", InputBytes: 26, OutputBytes: 21}}
	add(e)

	e = base(event.KindModelIO, event.SourceAPI, 161)
	e.Model = &event.Model{Tokens: 1834, IO: event.IO{InputSummary: "user: add lodash and use debounce in search.ts", OutputSummary: "tool_use bash: npm install lodash@^4.17.0"}}
	add(e)

	lifecycle := func(kind string, seq uint64, s *event.Session) {
		_, op, _ := strings.Cut(kind, ".")
		e := base(kind, event.SourceSession, seq)
		s.Op = op
		e.Session = s
		add(e)
	}
	lifecycle(event.KindSessionCreate, 1, &event.Session{Tenant: "acme", User: "dana@acme.example", Template: "node-20",
		Image: "ghcr.io/acme/sandbox-node:20", ImageDigest: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Host: "worker-3", Actor: "orchestrator",
		Limits: &event.Limits{MemoryBytes: 2 << 30, CPUs: 1.5, Pids: 512, TimeoutMS: 3_600_000, DiskBytes: 10 << 30}})
	lifecycle(event.KindSessionStart, 2, &event.Session{Host: "worker-3"})
	lifecycle(event.KindSessionPause, 300, &event.Session{Reason: "api", Actor: "dana@acme.example"})
	lifecycle(event.KindSessionResume, 301, &event.Session{Actor: "dana@acme.example"})
	lifecycle(event.KindSessionTerminate, 302, &event.Session{Reason: "normal", ExitStatus: event.I32(0)})
	lifecycle(event.KindSessionCleanup, 303, &event.Session{FSState: "snapshot", SnapshotSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"})

	e = base(event.KindLimitHit, event.SourceKernel, 200)
	e.Limit = &event.Limit{Type: "memory_oom", Measured: 2 << 30, Configured: 2 << 30, Unit: "bytes", Action: "kill"}
	e.Proc = &event.Proc{Pid: 4300, Comm: "node", CgroupID: 7214}
	add(e)

	e = base(event.KindAlert, event.SourceRules, 201)
	e.Alert = &event.Alert{RuleID: "c3f1b0a2-6f4e-4c1d-9d2a-1f0e7a5b3c21", Title: "Downloaded file made executable and run",
		Level: "high", Refs: []uint64{137, 121}, Summary: "chmod 755 /tmp/x/payload then exec"}
	add(e)

	e = base(event.KindLoss, event.SourceKernel, 202)
	e.Loss = &event.Loss{Count: 17, Source: "ringbuf:file", LostKind: event.KindFileWrite}
	add(e)

	e = base(event.KindCapabilities, event.SourceKernel, 0)
	e.SessionID = ""
	e.Kernel = &event.Kernel{Release: "6.1.0-50-cloud-amd64", Capabilities: []event.Capability{
		{Name: event.CapBTF, Have: true, Required: true, Detail: "/sys/kernel/btf/vmlinux"},
		{Name: event.CapRingbuf, Have: true, Required: true, Since: "5.8"},
		{Name: event.CapBPFLoop, Have: true, Required: true, Since: "5.17"},
		{Name: event.CapTaskPtRegs, Have: true, Required: true, Since: "5.15"},
		{Name: event.CapCgroupSockAddr, Have: true, Required: true, Since: "4.17"},
		{Name: event.CapBTFCast, Since: "6.2", Detail: "the bpf_rdonly_cast kfunc needs Linux 6.2; reading kernel memory with bpf_probe_read_kernel instead"},
		{Name: event.CapUnixEnforce, Since: "6.7", Detail: "unix-socket enforcement needs Linux 6.7; recording connects from syscalls instead"},
		{Name: event.CapClone3Kill, Since: "6.13", Detail: "killing a clone3 child in a new user namespace needs bpf_send_signal_task (Linux 6.13); recording it instead"},
		{Name: event.CapOverlayInode, Have: true, Detail: "overlay's inode layout from the overlay module's BTF"},
		{Name: event.CapGetpeername, Have: true, Since: "5.8"},
	}}
	add(e)

	e = base(event.KindJournalRecovered, event.SourceJournal, 0)
	e.SessionID = ""
	e.Journal = &event.Journal{Segment: "00000000000000000042.seg", Offset: 1048211, CutBytes: 87, Detail: "torn tail cut back to the last complete entry"}
	add(e)

	e = base(event.KindRetentionPrune, event.SourceJournal, 0)
	e.SessionID = ""
	e.Retention = &event.Retention{Op: event.RetentionPrune, UID: event.U32(0), Actor: "root (uid 0)", HotDays: 90,
		Cutoff:      time.Date(2026, 8, 31, 3, 0, 0, 0, time.UTC),
		Sessions:    []event.PrunedSession{{ID: "sess-2026-07-01-a", Entries: 5120}, {ID: "sess-2026-07-02-b", Entries: 880}},
		Sessionless: 14, Entries: 6014, Ranges: []event.SeqRange{{First: 0, Last: 5999}, {First: 6012, Last: 6025}},
		Held: []string{"sess-2026-07-03-c"}}
	add(e)

	e = base(event.KindRetentionHold, event.SourceJournal, 0)
	e.SessionID = ""
	e.Retention = &event.Retention{Op: event.RetentionHold, Session: "sess-2026-07-03-c", Reason: "litigation hold, case 2026-114",
		UID: event.U32(0), Actor: "root (uid 0)"}
	add(e)

	e = base(event.KindRetentionRelease, event.SourceJournal, 0)
	e.SessionID = ""
	e.Retention = &event.Retention{Op: event.RetentionRelease, Session: "sess-2026-07-03-c", Reason: "case 2026-114 closed",
		UID: event.U32(0), Actor: "root (uid 0)"}
	add(e)

	e = base(event.KindInvestigateUnseal, event.SourceJournal, 0)
	e.SessionID = ""
	e.Investigate = &event.Investigate{Op: "unseal", Session: "s-01JQ7ZK3V9TQ4M2X8C5N6B7D0E", Events: []uint64{160},
		Refs:   []string{"sha256:4c1f0d6a8e2b39f7c5d1e0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1"},
		Reason: "IR-2026-031: what did the agent send to bash", UID: event.U32(0), Actor: "root (uid 0)",
		Recipient: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}
	add(e)

	return m
}
