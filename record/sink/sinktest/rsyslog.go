package sinktest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Rsyslogd is a real rsyslogd (Debian's rsyslog and rsyslog-gnutls)
// listening for TLS syslog on a loopback port (Port; plain TCP syslog on
// PlainPort), writing each message it receives from sandtrail, raw, as a
// line of Out.
type Rsyslogd struct {
	t testing.TB
	// Dir holds its config, certificates (WriteCerts) and output.
	Dir             string
	Port, PlainPort int
	// MTLSPort takes TLS only from clients with a certificate of CA.
	MTLSPort int
	cmd      *exec.Cmd
	// CA is the PEM file of the CA that signed its certificate (for
	// localhost and 127.0.0.1); Out the file of the messages.
	CA, Out string
}

// rsyslogdPath finds rsyslogd, skipping the test when it is missing,
// unless CI is set: there scripts/deps.sh test installs it, and its
// absence fails.
func rsyslogdPath(t testing.TB) string {
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

// StartRsyslogd writes a CA, a server certificate and a config into a
// temporary directory and starts rsyslogd on free loopback ports; the end
// of t kills it.
func StartRsyslogd(t testing.TB) *Rsyslogd {
	t.Helper()
	bin := rsyslogdPath(t)
	r := &Rsyslogd{t: t, Dir: t.TempDir()}
	r.CA, r.Out = filepath.Join(r.Dir, "ca.pem"), filepath.Join(r.Dir, "out.log")
	WriteCerts(t, r.Dir)
	r.Port, r.PlainPort, r.MTLSPort = freePort(t), freePort(t), freePort(t)
	os.Mkdir(filepath.Join(r.Dir, "work"), 0o700)
	conf := fmt.Sprintf(rsyslogConf, r.Dir, r.Port, r.PlainPort, r.MTLSPort)
	if err := os.WriteFile(filepath.Join(r.Dir, "rsyslog.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-N1", "-f", filepath.Join(r.Dir, "rsyslog.conf")).CombinedOutput(); err != nil {
		t.Fatalf("rsyslogd -N1 (the config check): %v\n%s", err, out)
	}
	r.Start()
	return r
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

// Start starts rsyslogd (again, after Kill) on its ports and waits until
// it takes connections.
func (r *Rsyslogd) Start() {
	r.t.Helper()
	log, err := os.OpenFile(filepath.Join(r.Dir, "rsyslogd.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	defer log.Close()
	r.cmd = exec.Command(rsyslogdPath(r.t), "-n", "-f", filepath.Join(r.Dir, "rsyslog.conf"), "-i", filepath.Join(r.Dir, "rsyslogd.pid"))
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	cmd := r.cmd
	r.t.Cleanup(func() { r.killCmd(cmd) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.Port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		b, _ := os.ReadFile(filepath.Join(r.Dir, "rsyslogd.log"))
		if bytes.Contains(b, []byte("could not load module 'lmnsd_gtls'")) {
			if os.Getenv("CI") == "true" {
				r.t.Fatalf("rsyslogd has no gtls driver under CI: scripts/deps.sh test installs rsyslog-gnutls\n%s", b)
			}
			r.t.Skipf("rsyslogd has no gtls driver (apt-get install rsyslog-gnutls, or scripts/deps.sh test): %s", b)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("rsyslogd does not listen on %d: %v\n%s", r.Port, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill SIGKILLs the rsyslogd the test started, by its pid, and waits for
// it.
func (r *Rsyslogd) Kill() { r.killCmd(r.cmd) }

func (r *Rsyslogd) killCmd(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// Addr is its TLS listener's address.
func (r *Rsyslogd) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.Port) }

// WriteCerts writes into dir a new CA's certificate (ca.pem), a server
// certificate it signed for localhost and 127.0.0.1 (server.pem,
// server-key.pem) and a client certificate (client.pem, client-key.pem).
func WriteCerts(t testing.TB, dir string) {
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
func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, base string, tmpl *x509.Certificate) {
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

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
