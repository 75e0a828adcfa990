package main

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/pflag"

	"github.com/sandtrail/sandtrail/collector/session/launch"
	"github.com/sandtrail/sandtrail/record/event"
)

func TestLimitFlags(t *testing.T) {
	base := event.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 1024, TimeoutMS: 3600_000, DiskBytes: 1 << 34}
	tests := []struct {
		name    string
		args    []string
		want    event.Limits
		wantErr string
	}{
		{name: "no flags keep the policy's", want: base},
		{name: "each flag overrides one", args: []string{"--memory", "64M", "--cpus", "500m", "--pids", "64", "--timeout", "2s", "--disk", "1G"},
			want: event.Limits{MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 64, TimeoutMS: 2000, DiskBytes: 1 << 30}},
		{name: "zero is unlimited", args: []string{"--memory", "0"}, want: event.Limits{CPUs: 2, Pids: 1024, TimeoutMS: 3600_000, DiskBytes: 1 << 34}},
		{name: "bad memory", args: []string{"--memory", "lots"}, wantErr: "--memory"},
		{name: "bad timeout", args: []string{"--timeout", "soon"}, wantErr: "--timeout"},
		{name: "net rate", args: []string{"--net-rate", "1MB"},
			want: event.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 1024, TimeoutMS: 3600_000, DiskBytes: 1 << 34, NetRate: 1 << 20}},
		{name: "net rate per second", args: []string{"--net-rate", "512K/s"},
			want: event.Limits{MemoryBytes: 1 << 30, CPUs: 2, Pids: 1024, TimeoutMS: 3600_000, DiskBytes: 1 << 34, NetRate: 512 << 10}},
		{name: "bad net rate", args: []string{"--net-rate", "fast"}, wantErr: "--net-rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l limitFlags
			f := pflag.NewFlagSet("x", pflag.ContinueOnError)
			l.bind(f)
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := l.apply(base, f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("apply(%q) = %v, want an error naming %s", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("apply(%q) = %+v, %v, want %+v", tt.args, got, err, tt.want)
			}
		})
	}
}

// TestTimeline builds a tree from a real journal and index: children
// under parents by ppid, a recycled pid as a new process, lifecycle steps
// in order.
func TestTimeline(t *testing.T) {
	data := t.TempDir()
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	n := 0
	mk := func(kind string, src event.Source, f func(*event.Event)) *event.Event {
		n++
		e := &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(n) * time.Millisecond), SessionID: "S", Kind: kind, Source: src}
		f(e)
		return e
	}
	start := func(pid int32) time.Time { return t0.Add(time.Duration(pid) * time.Microsecond) }
	proc := func(kind string, pid, ppid int32, argv []string, code *int32) *event.Event {
		return mk(kind, event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: pid, PPid: ppid, Argv: argv, UID: event.U32(1000), Cwd: "/w", ExitCode: code, StartTS: start(pid)}
		})
	}
	evs := []*event.Event{
		mk("session.create", event.SourceSession, func(e *event.Event) { e.Session = &event.Session{Op: "create", User: "agent"} }),
		proc("process.fork", 10, 1, nil, nil),
		proc("process.exec", 10, 1, []string{"sh", "-c", "x"}, nil),
		proc("process.fork", 11, 10, nil, nil),
		proc("process.exec", 11, 10, []string{"/bin/echo", "a", "b c"}, nil),
		proc("process.exit", 11, 10, nil, event.I32(0)),
		mk("limit.hit", event.SourceSession, func(e *event.Event) {
			e.Limit = &event.Limit{Type: "pids", Measured: 64, Configured: 64, Unit: "count", Action: "throttle"}
		}),
		proc("process.fork", 12, 10, nil, nil),
		proc("process.exec", 12, 10, []string{"true"}, nil),
		proc("process.exit", 12, 10, nil, event.I32(0)),
		proc("process.exit", 10, 1, nil, event.I32(7)),
		mk("session.terminate", event.SourceSession, func(e *event.Event) {
			e.Session = &event.Session{Op: "terminate", Reason: "normal", ExitStatus: event.I32(7)}
		}),
		mk("process.exec", event.SourceKernel, func(e *event.Event) {
			e.Proc = &event.Proc{Pid: 99, Argv: []string{"other"}}
			e.SessionID = "T"
		}),
	}
	queryFixture(t, data, evs)
	cfg := &Config{DataDir: data}
	ix, err := openIndex(t.Context(), cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	r, _, err := sessionReport(t.Context(), &ix.Reader, "S", cfg.ShimDir, false)
	if err != nil {
		t.Fatal(err)
	}
	tl := r.Timeline
	if tl.Events != 12 {
		t.Errorf("timeline events = %d, want 12", tl.Events)
	}
	if len(tl.Processes) != 1 || tl.Processes[0].Pid != 10 || len(tl.Processes[0].Children) != 2 {
		t.Fatalf("process tree = %+v, want sh (10) with two children", tl.Processes)
	}
	sh := tl.Processes[0]
	if sh.ExitCode == nil || *sh.ExitCode != 7 || !sh.Exited {
		t.Errorf("sh exit = %v, want 7", sh.ExitCode)
	}
	if c := sh.Children[0]; c.Pid != 11 || !slices.Equal(c.Argv, []string{"/bin/echo", "a", "b c"}) || c.ExitCode == nil || *c.ExitCode != 0 {
		t.Errorf("first child = %+v, want echo (11), exit 0", c)
	}
	var kinds []string
	for _, s := range tl.Steps {
		kinds = append(kinds, s.Kind)
	}
	if want := []string{"session.create", "limit.hit", "session.terminate"}; !slices.Equal(kinds, want) {
		t.Errorf("steps = %q, want %q", kinds, want)
	}
	var b strings.Builder
	writeTimeline(&b, r, timelineStyle{})
	out := b.String()
	// The children's cwd and uid are their parent's, so not repeated.
	for _, want := range []string{" 10 sh -c x  cwd=/w  uid=1000  exit 7", " ├─ 11 /bin/echo a 'b c'  exit 0", " └─ 12 true  exit 0",
		"pids: measured 64 count, configured 64 count, throttle", "reason=normal exit_status=7"} {
		if !strings.Contains(out, want) {
			t.Errorf("timeline text lacks %q:\n%s", want, out)
		}
	}
}

func jsonDecode(conn net.Conn, v any) error {
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	return json.NewDecoder(conn).Decode(v)
}

// summaryKernel returns a kernel with every capability of
// event.Capabilities (the first five required), without those named.
func summaryKernel(release string, without ...string) *event.Kernel {
	k := &event.Kernel{Release: release}
	for i, n := range event.Capabilities {
		k.Capabilities = append(k.Capabilities, event.Capability{Name: n, Have: !slices.Contains(without, n), Required: i < 5})
	}
	return k
}

// TestRunSummaryKernel: run's summary names what the session's host's
// kernel collector ran without, from its newest collector.capabilities: in
// the journal from where a host in this process opened it, or, for a
// daemon's session, from the index; and says nothing when nothing is
// missing. The capabilities event is not counted among the session's.
func TestRunSummaryKernel(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	caps := func(at int, k *event.Kernel) *event.Event {
		return &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(at) * time.Second), Kind: event.KindCapabilities,
			Source: event.SourceKernel, Kernel: k}
	}
	exec := func(at int) *event.Event {
		return &event.Event{V: event.SchemaVersion, TS: t0.Add(time.Duration(at) * time.Second), SessionID: "S", Kind: event.KindExec,
			Source: event.SourceKernel, Proc: &event.Proc{Pid: 10, Argv: []string{"true"}}}
	}
	older := summaryKernel("6.1.0-49-cloud-amd64", event.CapBTFCast)
	daemons := summaryKernel("6.1.0-50-cloud-amd64", event.CapUnixEnforce, event.CapClone3Kill)
	later := summaryKernel("6.12.0", event.CapClone3Kill)
	tests := []struct {
		name       string
		evs        []*event.Event
		from       uint64 // the session's first seq
		hosted     string
		kernelFrom uint64
		want       string // the kernel line, "" for none
	}{
		{"this process: its own host's, before the session", []*event.Event{caps(0, older), caps(1, daemons), exec(2)}, 2, hostedHere, 1,
			"  kernel    6.1.0-50-cloud-amd64: without unix_enforce, clone3_kill\n"},
		{"this process: nothing before where it opened the journal", []*event.Event{caps(0, older), exec(2)}, 1, hostedHere, 1, ""},
		{"daemon: the newest before the session, from the index", []*event.Event{caps(0, older), caps(1, daemons), exec(2)}, 2, hostedByDaemon, 2,
			"  kernel    6.1.0-50-cloud-amd64: without unix_enforce, clone3_kill\n"},
		{"daemon: one journaled during the session wins", []*event.Event{caps(0, daemons), exec(1), caps(2, later), exec(3)}, 1, hostedByDaemon, 1,
			"  kernel    6.12.0: without clone3_kill\n"},
		{"nothing missing", []*event.Event{caps(0, summaryKernel("6.18.0")), exec(1)}, 1, hostedByDaemon, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			queryFixture(t, data, tt.evs)
			cfg := &Config{DataDir: data, KeyFile: data + "/test.key"}
			res := &launch.Result{SessionID: "S", Reason: "normal", Started: t0, Ended: t0.Add(time.Second), From: tt.from}
			sum := summarize(t.Context(), cfg, res, tt.hosted, tt.kernelFrom)
			var b strings.Builder
			writeRunSummary(&b, sum)
			var line string
			for _, l := range strings.SplitAfter(b.String(), "\n") {
				if strings.HasPrefix(l, "  kernel ") {
					line += l
				}
			}
			if line != tt.want {
				t.Errorf("kernel line = %q, want %q; summary:\n%s", line, tt.want, b.String())
			}
			if got := sum.ByCategory["collector"]; got != 0 {
				t.Errorf("summary counts %d collector events of the session, want 0", got)
			}
			var j struct {
				Kernel *event.Kernel `json:"kernel"`
			}
			var jb strings.Builder
			if err := writeJSON(&jb, sum); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(jb.String()), &j); err != nil {
				t.Fatal(err)
			}
			if (j.Kernel == nil) != (sum.Kernel == nil) || j.Kernel != nil && j.Kernel.Release != sum.Kernel.Release {
				t.Errorf("JSON kernel = %+v, want %+v", j.Kernel, sum.Kernel)
			}
		})
	}
}
