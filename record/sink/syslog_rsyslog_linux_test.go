package sink

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// rsyslogMessages parses the messages rsyslogd's out file holds so far.
func rsyslogMessages(t *testing.T, r *sinktest.Rsyslogd) []rfc5424 {
	t.Helper()
	f, err := os.Open(r.Out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rfc5424
	br := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil { // EOF, or a line rsyslogd is yet to finish
			return out
		}
		m, err := parseRFC5424(line[:len(line)-1])
		if err != nil {
			t.Fatalf("rsyslogd wrote %q: %v", line, err)
		}
		out = append(out, m)
	}
}

// syslogSeqCounts counts the messages of each seq, checking that each carries
// its seq in its SD and its MSG alike.
func syslogSeqCounts(t *testing.T, msgs []rfc5424) map[uint64]int {
	t.Helper()
	n := map[uint64]int{}
	for _, m := range msgs {
		if m.msgID == "checkpoint" {
			continue
		}
		var e struct {
			Seq      uint64 `json:"seq"`
			Oversize *struct {
				Seq uint64 `json:"seq"`
			} `json:"sandtrail_oversize"`
		}
		if err := json.Unmarshal(m.msg, &e); err != nil {
			t.Fatalf("MSG %q: %v", m.msg, err)
		}
		if e.Oversize != nil {
			e.Seq = e.Oversize.Seq
		}
		if m.params["seq"] != fmt.Sprint(e.Seq) {
			t.Fatalf("SD seq %q, MSG seq %d", m.params["seq"], e.Seq)
		}
		n[e.Seq]++
	}
	return n
}

// waitMessages waits until rsyslogd wrote n distinct seqs.
func waitMessages(t *testing.T, r *sinktest.Rsyslogd, n int) map[uint64]int {
	t.Helper()
	var counts map[uint64]int
	waitLen(t, "distinct seqs rsyslogd wrote", n, func() int {
		counts = syslogSeqCounts(t, rsyslogMessages(t, r))
		return len(counts)
	})
	return counts
}

// syslogTo is a TLS syslog sink to r, as the test's host, with c's other
// settings.
func syslogTo(t *testing.T, r *sinktest.Rsyslogd, c SyslogConfig) *Syslog {
	t.Helper()
	c.Address, c.TLS, c.Host = r.Addr(), true, "host.one"
	if c.CAFile == "" {
		c.CAFile = r.CA
	}
	s, err := NewSyslog(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSyslogSinkRsyslog: a syslog sink streams the journal to a real
// rsyslogd, over TLS and over plain TCP: every seq arrives once,
// parseable, an alert at its level's severity, an entry past the max
// message as its stub.
func TestSyslogSinkRsyslog(t *testing.T) {
	for _, tls := range []bool{true, false} {
		t.Run(map[bool]string{true: "tls", false: "tcp"}[tls], func(t *testing.T) {
			r := sinktest.StartRsyslogd(t)
			j, dir := testJournal(t)
			appendExecs(t, j, 200)
			alert := &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "s1", Kind: event.KindAlert, Source: event.SourceRules,
				Alert: &event.Alert{RuleID: "r1", Title: "a rule", Level: "high"}}
			huge := &event.Event{V: event.SchemaVersion, TS: time.Now(), SessionID: "s1", Kind: event.KindExec, Source: event.SourceKernel,
				Proc: &event.Proc{Pid: 1, Comm: "big", Argv: []string{strings.Repeat("a", 100<<10)}}}
			if err := j.Append(context.Background(), alert, huge); err != nil {
				t.Fatal(err)
			}
			var s *Syslog
			if tls {
				s = syslogTo(t, r, SyslogConfig{Facility: "auth"})
			} else {
				s = plainSyslogTo(t, r, SyslogConfig{Facility: "auth"})
			}
			if _, err := j.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			start(t, Config{Name: "syslog", JournalDir: dir, CursorDir: t.TempDir(), Batch: 50}, s, j)
			counts := waitMessages(t, r, 202)
			for seq := range uint64(202) {
				if counts[seq] != 1 {
					t.Errorf("seq %d arrived %d times, want once", seq, counts[seq])
				}
			}
			checkHeaders(t, rsyslogMessages(t, r))
			// verify --against reads rsyslogd's file as it wrote it.
			waitLen(t, "checkpoints in rsyslogd's file", 1, func() int {
				f, err := os.Open(r.Out)
				if err != nil {
					return 0
				}
				defer f.Close()
				cps, err := Checkpoints(f)
				if err != nil {
					t.Fatalf("Checkpoints of rsyslogd's file: %v", err)
				}
				return len(cps)
			})
		})
	}
}

// checkHeaders checks the PRI (facility auth), host and app of each
// message, and that seq 201 came as its stub.
func checkHeaders(t *testing.T, msgs []rfc5424) {
	t.Helper()
	for _, m := range msgs {
		want := 4*8 + severityInformational
		if m.msgID == "alert" {
			want = 4*8 + severityError
		}
		if m.pri != want || m.hostname != "host.one" || m.params["host"] != "host.one" || m.app != "sandtrail" {
			t.Errorf("message %v: want PRI %d, host host.one, app sandtrail", m, want)
		}
		if m.params["seq"] == "201" && !strings.HasPrefix(string(m.msg), `{"sandtrail_oversize":{"bytes":`) {
			t.Errorf("seq 201 (over %d bytes) arrived as %.80s, want its stub", DefaultSyslogMaxMessage, m.msg)
		}
	}
}

// plainSyslogTo is a plain TCP syslog sink to r's plain port.
func plainSyslogTo(t *testing.T, r *sinktest.Rsyslogd, c SyslogConfig) *Syslog {
	t.Helper()
	c.Address, c.Host = fmt.Sprintf("127.0.0.1:%d", r.PlainPort), "host.one"
	s, err := NewSyslog(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSyslogSinkVerifiesTLS: a receiver whose certificate the sink cannot
// verify (another CA, another name, the system's roots) gets nothing: the
// Write is an error, and no plain-TCP fallback sends anything.
func TestSyslogSinkVerifiesTLS(t *testing.T) {
	r := sinktest.StartRsyslogd(t)
	other := t.TempDir()
	sinktest.WriteCerts(t, other)
	for _, tc := range []struct {
		name string
		c    SyslogConfig
	}{
		{"another CA", SyslogConfig{CAFile: filepath.Join(other, "ca.pem")}},
		{"another name", SyslogConfig{CAFile: r.CA, ServerName: "logs.example"}},
		{"system roots", SyslogConfig{CAFile: "/dev/null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Address, c.TLS = r.Addr(), true
			if c.CAFile == "/dev/null" {
				c.CAFile = ""
			}
			s, err := NewSyslog(c)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.Write(context.Background(), []Entry{{Seq: 1, Kind: "process.exec", Line: []byte(`{"seq":1}`)}})
			if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("Write to a receiver it cannot verify = %v, want a certificate error", err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if msgs := rsyslogMessages(t, r); len(msgs) != 0 {
		t.Errorf("rsyslogd got %d messages from sinks that could not verify it", len(msgs))
	}
}

// TestSyslogSinkRsyslogKilled: rsyslogd is SIGKILLed while a Runner
// streams a few thousand entries into it, then started again on the same
// port. With what it had acknowledged and lost sent again, every seq
// arrives, and after dedupe by seq each exactly once. The control: with
// the resend window cut to one entry, the same kill loses entries, so the
// window is what saves them.
func TestSyslogSinkRsyslogKilled(t *testing.T) {
	const total = 3000
	t.Run("resend window", func(t *testing.T) {
		r, s := streamThroughKill(t, total, 0)
		dups := checkDelivered(t, total, waitMessages(t, r, total))
		s.mu.Lock()
		t.Logf("%d entries sent again on the new connection; %d duplicates at the receiver", s.resent, dups)
		s.mu.Unlock()
	})
	t.Run("no window", func(t *testing.T) {
		r, _ := streamThroughKill(t, total, 1)
		// The last entries came after the restart: once they are in, so
		// is everything the receiver will ever write, after a flush.
		waitLen(t, "the last seq at the receiver", 1, func() int { return syslogSeqCounts(t, rsyslogMessages(t, r))[total-1] })
		time.Sleep(1500 * time.Millisecond) // omfile's flushInterval, and more
		if n := len(syslogSeqCounts(t, rsyslogMessages(t, r))); n == total {
			t.Errorf("all %d seqs arrived with no resend window: the kill lost nothing, so the test shows nothing", n)
		} else {
			t.Logf("with no window, %d of %d seqs were lost", total-n, total)
		}
	})
}

// streamThroughKill streams total entries through a Runner into a TLS
// syslog sink to a new rsyslogd (resendMax bounding its window, 0 the
// default), SIGKILLs it a third of the way, starts it again on the same
// port and returns once the cursor is at the end.
func streamThroughKill(t *testing.T, total, resendMax int) (*sinktest.Rsyslogd, *Syslog) {
	const chunk = 50
	r := sinktest.StartRsyslogd(t)
	j, dir := testJournal(t)
	s := syslogTo(t, r, SyslogConfig{Timeout: 2 * time.Second, ResendMax: resendMax})
	run, _ := start(t, Config{Name: "syslog", JournalDir: dir, CursorDir: t.TempDir(), Batch: 64, MaxBackoff: 200 * time.Millisecond}, s, j)
	appended := make(chan error, 1)
	go func() {
		for range total / chunk {
			if err := j.Append(context.Background(), execs(chunk)...); err != nil {
				appended <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
		appended <- nil
	}()
	waitLen(t, "cursor before the kill", total/3, func() int { return int(run.Status().Cursor) })
	r.Kill()
	t.Logf("rsyslogd killed at cursor %d", run.Status().Cursor)
	time.Sleep(300 * time.Millisecond)
	r.Start()
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	waitLen(t, "cursor after the restart", total, func() int { return int(run.Status().Cursor) })
	return r, s
}

// TestSyslogSinkClientCert: a receiver that wants a client certificate
// takes the sink's messages with cert_file and key_file, and none
// without: a TLS 1.3 receiver refuses the certificate after the
// handshake, so the first Write may return before the refusal is seen,
// but the refusal breaks the connection, the next Write fails, and the
// entries stay in the window for the next connection.
func TestSyslogSinkClientCert(t *testing.T) {
	r := sinktest.StartRsyslogd(t)
	addr := fmt.Sprintf("127.0.0.1:%d", r.MTLSPort)
	batch := func(seq uint64) []Entry {
		return []Entry{{Seq: seq, Kind: "process.exec", Line: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}}
	}
	without, err := NewSyslog(SyslogConfig{Address: addr, TLS: true, CAFile: r.CA, Host: "host.one"})
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()
	err = without.Write(context.Background(), batch(1))
	writes := 1
	for ; err == nil && writes < 20; writes++ {
		time.Sleep(50 * time.Millisecond)
		err = without.Write(context.Background(), batch(1))
	}
	if err == nil {
		t.Error("Writes without a client certificate to a receiver that wants one all succeeded")
	}
	t.Logf("without a client certificate, write %d failed: %v", writes, err)
	with, err := NewSyslog(SyslogConfig{Address: addr, TLS: true, CAFile: r.CA, Host: "host.one",
		CertFile: filepath.Join(r.Dir, "client.pem"), KeyFile: filepath.Join(r.Dir, "client-key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	defer with.Close()
	if err := with.Write(context.Background(), batch(2)); err != nil {
		t.Fatalf("Write with a client certificate = %v", err)
	}
	counts := waitMessages(t, r, 1)
	if counts[2] != 1 || counts[1] != 0 {
		t.Errorf("rsyslogd wrote seqs %v, want seq 2 alone", counts)
	}
}
