package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rfc5424 is a message parsed back, for the tests: the header's fields,
// the params of its one SD element, and the MSG.
type rfc5424 struct {
	pri                                    int
	ts, hostname, app, procID, msgID, sdID string
	params                                 map[string]string
	msg                                    []byte
}

func (m rfc5424) String() string {
	return fmt.Sprintf("<%d> %s %s %s %s %s [%s %v] %s", m.pri, m.ts, m.hostname, m.app, m.procID, m.msgID, m.sdID, m.params, m.msg)
}

// parseRFC5424 parses a message as the sink writes it, strictly: the
// RFC's field limits and a single SD element with escaped values.
func parseRFC5424(b []byte) (rfc5424, error) {
	var m rfc5424
	rest, ok := bytes.CutPrefix(b, []byte("<"))
	end := bytes.Index(rest, []byte(">1 "))
	if !ok || end < 1 || end > 3 {
		return m, errors.New("no <PRI>1")
	}
	pri, err := strconv.Atoi(string(rest[:end]))
	if err != nil || pri > 191 {
		return m, fmt.Errorf("PRI %q", rest[:end])
	}
	m.pri, rest = pri, rest[end+3:]
	fields := bytes.SplitN(rest, []byte(" "), 6)
	if len(fields) != 6 {
		return m, errors.New("too few header fields")
	}
	m.ts, m.hostname, m.app, m.procID, m.msgID = string(fields[0]), string(fields[1]), string(fields[2]), string(fields[3]), string(fields[4])
	for _, f := range []struct {
		v   string
		max int
	}{{m.hostname, 255}, {m.app, 48}, {m.procID, 128}, {m.msgID, 32}} {
		if len(f.v) == 0 || len(f.v) > f.max || strings.IndexFunc(f.v, func(r rune) bool { return r < 33 || r > 126 }) >= 0 {
			return m, fmt.Errorf("header field %q", f.v)
		}
	}
	if m.ts != "-" {
		if _, err := time.Parse(time.RFC3339Nano, m.ts); err != nil {
			return m, fmt.Errorf("timestamp: %w", err)
		}
	}
	rest, err = m.parseSD(fields[5])
	if err != nil {
		return m, err
	}
	m.msg, ok = bytes.CutPrefix(rest, []byte(" "))
	if !ok {
		return m, errors.New("no MSG after the SD")
	}
	return m, nil
}

// parseSD parses [SD-ID name="value" ...] into m and returns what
// follows it.
func (m *rfc5424) parseSD(b []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(b, []byte("["))
	i := bytes.IndexAny(rest, " ]")
	if !ok || i < 1 {
		return nil, errors.New("no SD element")
	}
	m.sdID, rest, m.params = string(rest[:i]), rest[i:], map[string]string{}
	for len(rest) > 0 && rest[0] == ' ' {
		eq := bytes.Index(rest, []byte(`="`))
		if eq < 2 {
			return nil, errors.New("SD param with no name")
		}
		name := string(rest[1:eq])
		var v []byte
		j := eq + 2
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' && j+1 < len(rest) && strings.IndexByte(`"\]`, rest[j+1]) >= 0 {
				j++
			} else if rest[j] == ']' {
				return nil, errors.New("unescaped ] in an SD param")
			}
			v = append(v, rest[j])
		}
		if j == len(rest) {
			return nil, errors.New("unterminated SD param")
		}
		m.params[name], rest = string(v), rest[j+1:]
	}
	rest, ok = bytes.CutPrefix(rest, []byte("]"))
	if !ok {
		return nil, errors.New("unterminated SD element")
	}
	return rest, nil
}

func testFormat(host string, max int) *syslogFormat {
	return &syslogFormat{facility: 16, hostname: printUSASCII(host, maxHostname), procID: "42", sdID: DefaultSyslogSDID, max: max}
}

// TestSyslogMessage: the sink's messages parse as RFC 5424, with the
// field limits, SD escaping, severities by alert level and oversize stubs.
func TestSyslogMessage(t *testing.T) {
	ts := time.Date(2026, 12, 2, 11, 30, 0, 123456789, time.FixedZone("x", 3600))
	big := []byte(`{"seq":9,"pad":"` + strings.Repeat("x", 3000) + `"}`)
	for _, tc := range []struct {
		name     string
		host     string
		e        Entry
		wantHost string
		wantPRI  int
		wantMsg  string
		wantSD   map[string]string
		wantTS   string
		msgID    string
	}{
		{name: "exec", host: "web1", e: Entry{Seq: 7, Kind: "process.exec", TS: ts, Line: []byte(`{"seq":7}`)},
			wantHost: "web1", wantPRI: 16*8 + 6, wantMsg: `{"seq":7}`, wantSD: map[string]string{"seq": "7", "host": "web1"},
			wantTS: "2026-12-02T10:30:00.123456Z", msgID: "process.exec"},
		{name: "escaped host", host: `a"b\c]d e`, e: Entry{Seq: 1, Kind: "dns.query", Line: []byte(`{}`)},
			wantHost: `a"b\c]d_e`, wantPRI: 134, wantMsg: `{}`, wantSD: map[string]string{"seq": "1", "host": `a"b\c]d_e`}, wantTS: "-", msgID: "dns.query"},
		{name: "long host and kind", host: strings.Repeat("h", 300) + "é", e: Entry{Seq: 2, Kind: strings.Repeat("k", 40), Line: []byte(`{}`)},
			wantHost: strings.Repeat("h", 255), wantPRI: 134, wantMsg: `{}`, wantTS: "-", msgID: strings.Repeat("k", 32)},
		{name: "no host", e: Entry{Seq: 3, Kind: "", Line: []byte(`{}`)}, wantHost: "-", wantPRI: 134, wantMsg: `{}`, wantTS: "-", msgID: "-"},
		{name: "critical alert", host: "h", e: Entry{Seq: 4, Kind: "alert", Line: []byte(`{"alert":{"level":"critical"}}`)},
			wantHost: "h", wantPRI: 130, wantMsg: `{"alert":{"level":"critical"}}`, wantTS: "-", msgID: "alert"},
		{name: "ocsf medium alert", host: "h", e: Entry{Seq: 5, Kind: "alert", Line: []byte(`{"class_uid":2004,"severity_id":3}`)},
			wantHost: "h", wantPRI: 132, wantMsg: `{"class_uid":2004,"severity_id":3}`, wantTS: "-", msgID: "alert"},
		{name: "alert of no level", host: "h", e: Entry{Seq: 6, Kind: "alert", Line: []byte(`{"alert":{}}`)},
			wantHost: "h", wantPRI: 133, wantMsg: `{"alert":{}}`, wantTS: "-", msgID: "alert"},
		{name: "checkpoint", host: "h", e: Entry{Seq: 99, Kind: "checkpoint", Checkpoint: 100, Line: []byte(`{"sandtrail_checkpoint":{}}`)},
			wantHost: "h", wantPRI: 134, wantMsg: `{"sandtrail_checkpoint":{}}`, wantSD: map[string]string{"checkpoint": "100", "host": "h"},
			wantTS: "-", msgID: "checkpoint"},
		{name: "oversize", host: "h", e: Entry{Seq: 9, Kind: "process.exec", Line: big},
			wantHost: "h", wantPRI: 134, wantMsg: `{"sandtrail_oversize":{"bytes":` + strconv.Itoa(len(big)) + `,"kind":"process.exec","seq":9}}`, wantTS: "-", msgID: "process.exec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := testFormat(tc.host, SyslogMinMessage)
			b := f.message(nil, tc.e)
			m, err := parseRFC5424(b)
			if err != nil {
				t.Fatalf("parseRFC5424(%q) = %v", b, err)
			}
			if m.pri != tc.wantPRI || m.hostname != tc.wantHost || m.ts != tc.wantTS || m.msgID != tc.msgID || m.app != "sandtrail" ||
				m.sdID != DefaultSyslogSDID || string(m.msg) != tc.wantMsg {
				t.Errorf("message = %q, parsed %v; want PRI %d, host %q, ts %s, msgid %s, msg %s", b, m, tc.wantPRI, tc.wantHost, tc.wantTS, tc.msgID, tc.wantMsg)
			}
			for k, v := range tc.wantSD {
				if m.params[k] != v {
					t.Errorf("SD %s = %q, want %q", k, m.params[k], v)
				}
			}
			if len(b) > SyslogMinMessage {
				t.Errorf("message of %d bytes, past the max %d", len(b), SyslogMinMessage)
			}
		})
	}
}

// TestSyslogFrame: a frame is the message's octet count, a space, the
// message.
func TestSyslogFrame(t *testing.T) {
	fr := testFormat("h", SyslogMinMessage).frame(Entry{Seq: 1, Kind: "k", Line: []byte(`{"é":1}`)})
	n, msg, _ := bytes.Cut(fr, []byte(" "))
	if l, err := strconv.Atoi(string(n)); err != nil || l != len(msg) {
		t.Errorf("frame %q: count %s, message of %d bytes", fr, n, len(msg))
	}
}

func TestSyslogConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    SyslogConfig
		ok   bool
	}{
		{"plain", SyslogConfig{Address: "127.0.0.1:514"}, true},
		{"tls", SyslogConfig{Address: "logs.example:6514", TLS: true, Facility: "auth"}, true},
		{"facility number", SyslogConfig{Address: "h:1", Facility: "23"}, true},
		{"no port", SyslogConfig{Address: "127.0.0.1"}, false},
		{"bad facility", SyslogConfig{Address: "h:1", Facility: "local8"}, false},
		{"facility 24", SyslogConfig{Address: "h:1", Facility: "24"}, false},
		{"ca without tls", SyslogConfig{Address: "h:1", CAFile: "/etc/ssl/certs/ca-certificates.crt"}, false},
		{"missing ca", SyslogConfig{Address: "h:1", TLS: true, CAFile: "/nonexistent"}, false},
		{"cert without key", SyslogConfig{Address: "h:1", TLS: true, CertFile: "/x.pem"}, false},
		{"registered sd-id", SyslogConfig{Address: "h:1", SDID: "origin"}, false},
		{"own sd-id", SyslogConfig{Address: "h:1", SDID: "trail@1.2.3"}, true},
		{"sd-id with space", SyslogConfig{Address: "h:1", SDID: "a b@1"}, false},
		{"small max", SyslogConfig{Address: "h:1", MaxMessage: 480}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSyslog(tc.c)
			if (err == nil) != tc.ok {
				t.Errorf("NewSyslog(%+v) = %v, want ok %v", tc.c, err, tc.ok)
			}
		})
	}
}

// FuzzSyslogMessage: whatever the host, kind and line, a message parses
// as RFC 5424 within the limits and carries the seq, the host and the
// line (or its stub) back.
func FuzzSyslogMessage(f *testing.F) {
	f.Add("web1", "process.exec", []byte(`{"seq":1}`), uint64(1), uint64(0))
	f.Add(`a"]\`, "alert", []byte(`{"alert":{"level":"high"}}`), uint64(2), uint64(0))
	f.Add("", "", []byte{}, uint64(0), uint64(5))
	f.Fuzz(func(t *testing.T, host, kind string, line []byte, seq, checkpoint uint64) {
		fm := testFormat(host, SyslogMinMessage)
		e := Entry{Seq: seq, Kind: kind, Checkpoint: checkpoint, Line: line}
		b := fm.message(nil, e)
		if len(b) > SyslogMinMessage {
			t.Fatalf("%d bytes, past %d", len(b), SyslogMinMessage)
		}
		m, err := parseRFC5424(b)
		if err != nil {
			t.Fatalf("parseRFC5424(%q) = %v", b, err)
		}
		key, want := "seq", seq
		if checkpoint != 0 {
			key, want = "checkpoint", checkpoint
		}
		if m.params[key] != strconv.FormatUint(want, 10) || m.params["host"] != fm.hostname || m.hostname != fm.hostname {
			t.Fatalf("message %q: params %v, want %s %d and host %q", b, m.params, key, want, fm.hostname)
		}
		if !bytes.Equal(m.msg, line) && !(json.Valid(m.msg) && bytes.HasPrefix(m.msg, []byte(`{"sandtrail_oversize":`))) {
			t.Fatalf("MSG %q: want the line or a stub", m.msg)
		}
	})
}

// brokeAt has s's connection (one on loopback) found ended at at.
func brokeAt(t *testing.T, s *Syslog, at time.Time) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s.conn = &syslogConn{c: c, tcp: c.(*net.TCPConn), dead: make(chan struct{}), deadAt: at}
	close(s.conn.dead)
	s.broke(nil)
}

// TestSyslogResendWindow: the window keeps what was acknowledged in the
// ResendAge, at most ResendMax entries and ResendBytes; once a connection
// broke it holds what is to be sent again, measured from the break, not
// from when the next connection comes.
func TestSyslogResendWindow(t *testing.T) {
	s, err := NewSyslog(SyslogConfig{Address: "127.0.0.1:1", ResendAge: 10 * time.Second, ResendMax: 5, ResendBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1e9, 0)
	frames := func(from, n, size int) []sentFrame {
		var out []sentFrame
		for i := range n {
			out = append(out, sentFrame{seq: uint64(from + i), frame: make([]byte, size)})
		}
		return out
	}
	seqs := func() []uint64 {
		var out []uint64
		for _, f := range s.window {
			out = append(out, f.seq)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		do   func(*testing.T)
		want []uint64
	}{
		{"kept", func(*testing.T) { s.remember(frames(0, 3, 10), t0) }, []uint64{0, 1, 2}},
		{"past ResendMax", func(*testing.T) { s.remember(frames(3, 4, 10), t0.Add(time.Second)) }, []uint64{2, 3, 4, 5, 6}},
		{"past ResendAge", func(*testing.T) { s.remember(frames(7, 1, 10), t0.Add(11*time.Second)) }, []uint64{3, 4, 5, 6, 7}},
		{"past ResendBytes", func(*testing.T) { s.remember(frames(8, 1, 70), t0.Add(11*time.Second)) }, []uint64{5, 6, 7, 8}},
		{"a break keeps the ResendAge before it", func(t *testing.T) { brokeAt(t, s, t0.Add(21*time.Second)) }, []uint64{7, 8}},
		{"a second break before the resend drops nothing", func(t *testing.T) { brokeAt(t, s, t0.Add(60*time.Second)) }, []uint64{7, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.do(t)
			if got := seqs(); !slices.Equal(got, tc.want) {
				t.Errorf("window = %v, want %v", got, tc.want)
			}
		})
	}
}
