package sink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// rsyslogd is a real rsyslogd (Debian's rsyslog and rsyslog-gnutls)
// listening for TLS syslog on a loopback port (and plain TCP syslog on
// another, plainPort), writing each message it receives from sandtrail,
// raw, as a line of out.
type rsyslogd struct {
	t               *testing.T
	dir             string
	port, plainPort int
	// mtlsPort takes TLS only from clients with a certificate of ca.
	mtlsPort int
	cmd      *exec.Cmd
	// ca is the PEM file of the CA that signed its certificate (for
	// localhost and 127.0.0.1).
	ca, out string
}

// rsyslogdPath finds rsyslogd, skipping the test when it is missing,
// unless CI is set: there scripts/deps.sh test installs it, and its
// absence fails.
func rsyslogdPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("rsyslogd")
	if err != nil {
		p = "/usr/sbin/rsyslogd"
		if _, serr := os.Stat(p); serr != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("rsyslogd is missing under CI: scripts/deps.sh test installs rsyslog and rsyslog-gnutls")
			}
			t.Skip("rsyslogd is not installed (apt-get install rsyslog rsyslog-gnutls, or scripts/deps.sh test)")
		}
	}
	return p
}

// startRsyslogd writes a CA, a server certificate and a config into a
// temporary directory and starts rsyslogd on a free loopback port.
func startRsyslogd(t *testing.T) *rsyslogd {
	t.Helper()
	bin := rsyslogdPath(t)
	r := &rsyslogd{t: t, dir: t.TempDir()}
	r.ca, r.out = filepath.Join(r.dir, "ca.pem"), filepath.Join(r.dir, "out.log")
	writeCerts(t, r.dir)
	r.port, r.plainPort, r.mtlsPort = freePort(t), freePort(t), freePort(t)
	os.Mkdir(filepath.Join(r.dir, "work"), 0o700)
	conf := fmt.Sprintf(rsyslogConf, r.dir, r.port, r.plainPort, r.mtlsPort)
	if err := os.WriteFile(filepath.Join(r.dir, "rsyslog.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-N1", "-f", filepath.Join(r.dir, "rsyslog.conf")).CombinedOutput(); err != nil {
		t.Fatalf("rsyslogd -N1 (the config check): %v\n%s", err, out)
	}
	r.start()
	return r
}

// freePort is a loopback port free as of now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rsyslogConf is the receiver's config (Sprintf: the directory, the
// ports): TLS (gtls, StreamDriver.Mode 1, no client authentication),
// plain TCP on the second port, TLS that wants a client certificate of
// the CA (x509/certvalid) on the third; octet-counted framing (imtcp takes it by default), messages up to
// 256k, and sandtrail's messages, raw, to out.log. omfile buffers its
// writes (asyncWriting, 1 MiB, flushed each second and not at each
// batch's end), as a busy receiver does: what it received and its TCP
// stack acknowledged is lost when it is killed, the case the sink's
// resend window is for.
const rsyslogConf = `global(workDirectory="%[1]s/work" maxMessageSize="256k"
	defaultNetstreamDriver="gtls"
	defaultNetstreamDriverCAFile="%[1]s/ca.pem"
	defaultNetstreamDriverCertFile="%[1]s/server.pem"
	defaultNetstreamDriverKeyFile="%[1]s/server-key.pem")
module(load="imtcp" streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon")
input(type="imtcp" address="127.0.0.1" port="%[2]d")
input(type="imtcp" address="127.0.0.1" port="%[3]d" streamDriver.name="ptcp" streamDriver.mode="0")
input(type="imtcp" address="127.0.0.1" port="%[4]d" streamDriver.authMode="x509/certvalid")
template(name="raw" type="string" string="%%rawmsg%%\n")
if $app-name == "sandtrail" then {
	action(type="omfile" file="%[1]s/out.log" template="raw" asyncWriting="on" ioBufferSize="1m" flushInterval="1" flushOnTXEnd="off")
}
`

// start starts rsyslogd on the port and waits until it takes
// connections.
func (r *rsyslogd) start() {
	r.t.Helper()
	log, err := os.OpenFile(filepath.Join(r.dir, "rsyslogd.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	defer log.Close()
	r.cmd = exec.Command(rsyslogdPath(r.t), "-n", "-f", filepath.Join(r.dir, "rsyslog.conf"), "-i", filepath.Join(r.dir, "rsyslogd.pid"))
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	cmd := r.cmd
	r.t.Cleanup(func() { r.killCmd(cmd) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		b, _ := os.ReadFile(filepath.Join(r.dir, "rsyslogd.log"))
		if bytes.Contains(b, []byte("could not load module 'lmnsd_gtls'")) {
			if os.Getenv("CI") == "true" {
				r.t.Fatalf("rsyslogd has no gtls driver under CI: scripts/deps.sh test installs rsyslog-gnutls\n%s", b)
			}
			r.t.Skipf("rsyslogd has no gtls driver (apt-get install rsyslog-gnutls, or scripts/deps.sh test): %s", b)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("rsyslogd does not listen on %d: %v\n%s", r.port, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs the rsyslogd this test started, by its pid, and waits for
// it.
func (r *rsyslogd) kill() { r.killCmd(r.cmd) }

func (r *rsyslogd) killCmd(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

func (r *rsyslogd) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// messages parses the messages out.log holds so far.
func (r *rsyslogd) messages() []rfc5424 {
	r.t.Helper()
	f, err := os.Open(r.out)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
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
			r.t.Fatalf("rsyslogd wrote %q: %v", line, err)
		}
		out = append(out, m)
	}
}

// writeCerts writes into dir a new CA's certificate (ca.pem), a server
// certificate it signed for localhost and 127.0.0.1 (server.pem,
// server-key.pem) and a client certificate (client.pem, client-key.pem).
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sandtrail test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	issue(t, caCert, caKey, filepath.Join(dir, "server"), &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	issue(t, caCert, caKey, filepath.Join(dir, "client"), &x509.Certificate{SerialNumber: big.NewInt(3),
		Subject: pkix.Name{CommonName: "host.one"}, DNSNames: []string{"host.one"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// issue signs tmpl (for a day, a new P-256 key) with the CA and writes
// the certificate to base.pem and its key to base-key.pem.
func issue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, base string, tmpl *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, base+".pem", "CERTIFICATE", der)
	writePEM(t, base+"-key.pem", "PRIVATE KEY", keyDER)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
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
func waitMessages(t *testing.T, r *rsyslogd, n int) map[uint64]int {
	t.Helper()
	var counts map[uint64]int
	waitLen(t, "distinct seqs rsyslogd wrote", n, func() int {
		counts = syslogSeqCounts(t, r.messages())
		return len(counts)
	})
	return counts
}

// syslogTo is a TLS syslog sink to r, as the test's host, with c's other
// settings.
func syslogTo(t *testing.T, r *rsyslogd, c SyslogConfig) *Syslog {
	t.Helper()
	c.Address, c.TLS, c.Host = r.addr(), true, "host.one"
	if c.CAFile == "" {
		c.CAFile = r.ca
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
			r := startRsyslogd(t)
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
			checkHeaders(t, r.messages())
			// verify --against reads rsyslogd's file as it wrote it.
			waitLen(t, "checkpoints in rsyslogd's file", 1, func() int {
				f, err := os.Open(r.out)
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
func plainSyslogTo(t *testing.T, r *rsyslogd, c SyslogConfig) *Syslog {
	t.Helper()
	c.Address, c.Host = fmt.Sprintf("127.0.0.1:%d", r.plainPort), "host.one"
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
	r := startRsyslogd(t)
	other := t.TempDir()
	writeCerts(t, other)
	for _, tc := range []struct {
		name string
		c    SyslogConfig
	}{
		{"another CA", SyslogConfig{CAFile: filepath.Join(other, "ca.pem")}},
		{"another name", SyslogConfig{CAFile: r.ca, ServerName: "logs.example"}},
		{"system roots", SyslogConfig{CAFile: "/dev/null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Address, c.TLS = r.addr(), true
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
	if msgs := r.messages(); len(msgs) != 0 {
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
		waitLen(t, "the last seq at the receiver", 1, func() int { return syslogSeqCounts(t, r.messages())[total-1] })
		time.Sleep(1500 * time.Millisecond) // omfile's flushInterval, and more
		if n := len(syslogSeqCounts(t, r.messages())); n == total {
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
func streamThroughKill(t *testing.T, total, resendMax int) (*rsyslogd, *Syslog) {
	const chunk = 50
	r := startRsyslogd(t)
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
	r.kill()
	t.Logf("rsyslogd killed at cursor %d", run.Status().Cursor)
	time.Sleep(300 * time.Millisecond)
	r.start()
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
	r := startRsyslogd(t)
	addr := fmt.Sprintf("127.0.0.1:%d", r.mtlsPort)
	batch := func(seq uint64) []Entry {
		return []Entry{{Seq: seq, Kind: "process.exec", Line: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}}
	}
	without, err := NewSyslog(SyslogConfig{Address: addr, TLS: true, CAFile: r.ca, Host: "host.one"})
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
	with, err := NewSyslog(SyslogConfig{Address: addr, TLS: true, CAFile: r.ca, Host: "host.one",
		CertFile: filepath.Join(r.dir, "client.pem"), KeyFile: filepath.Join(r.dir, "client-key.pem")})
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
