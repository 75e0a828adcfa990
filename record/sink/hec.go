package sink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// HEC is a Sink that posts entries to a Splunk HTTP Event Collector:
// POST <url>/services/collector/event with Authorization: Splunk <token>,
// a body of HEC events one after another, each
//
//	{"time":<ts, seconds.micros>,"host":...,"source":"sandtrail",
//	 "sourcetype":"sandtrail:jsonl"|"sandtrail:ocsf","index":...,
//	 "event":<the line>,"fields":{"seq":"N","kind":"..."}}
//
// gzip'd, a Runner's batch split into requests of at most MaxBytes and
// MaxEvents. Every request names the sink's channel
// (X-Splunk-Request-Channel). When the receiver has indexer
// acknowledgement on, its answers carry an ackId, and Write returns only
// once POST <url>/services/collector/ack says every one is acked (or
// fails after AckTimeout, and the batch is sent again); without an ackId,
// a 200 counts as written. Any other answer, and a failed connection, is
// an error (a *ReceiverError for a refusal), which the Runner retries
// with backoff. Duplicates after a retry carry the same fields.seq.
type HEC struct {
	c                  *http.Client
	eventURL, ackURL   string
	hdr                http.Header
	host, sourcetype   string
	index              string
	maxBytes, maxEvent int
	compress           bool
	ackTimeout         time.Duration
}

var _ Sink = (*HEC)(nil)

// HECConfig configures a HEC sink.
type HECConfig struct {
	// URL is the collector's base (https://splunk.example:8088, any path
	// kept); plain http is refused unless the host is loopback, since the
	// token would cross the network in the clear.
	URL string
	// Token is the HEC token, or TokenFile a file holding it (root's;
	// surrounding whitespace ignored). One of the two is required.
	Token, TokenFile string
	// Index names the index; empty, the token's default.
	Index string
	// Host names this machine: each event's host.
	Host string
	// Format is the Runner's (jsonl, ocsf), named in the sourcetype
	// sandtrail:<format>.
	Format string
	// CAFile, when set, is the only CA an https receiver's certificate
	// may chain to; otherwise the system's roots. There is no insecure
	// mode.
	CAFile string
	// MaxBytes bounds one request's body before compression (default
	// 1 MiB), MaxEvents its events (default 1000).
	MaxBytes, MaxEvents int
	// Compression is gzip (the default) or none.
	Compression string
	// AckTimeout bounds the wait for a batch's indexer acknowledgements
	// (default 60s).
	AckTimeout time.Duration
	// Channel is the X-Splunk-Request-Channel, a UUID; by default one
	// derived from Name (the sink's), Host, URL and Index, the same
	// across restarts and different for each sink.
	Channel, Name string
	// Timeout bounds one request (default 30s).
	Timeout time.Duration
}

// Defaults of a HEC sink.
const (
	DefaultHECMaxBytes   = 1 << 20
	DefaultHECMaxEvents  = 1000
	DefaultHECAckTimeout = 60 * time.Second
)

// NewHEC returns a HEC sink of c; it checks the URL, reads the token and
// the CA file, and sends nothing yet.
func NewHEC(c HECConfig) (*HEC, error) {
	u, err := parseReceiverURL(c.URL, true)
	if err != nil {
		return nil, fmt.Errorf("hec sink: %w", err)
	}
	token, err := hecToken(c.Token, c.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("hec sink: %w", err)
	}
	compress, err := gzipSetting(c.Compression)
	if err != nil {
		return nil, fmt.Errorf("hec sink: %w", err)
	}
	client, err := newHTTPClient(c.CAFile, c.Timeout)
	if err != nil {
		return nil, fmt.Errorf("hec sink: %w", err)
	}
	base := strings.TrimSuffix(u.String(), "/")
	if c.Channel == "" {
		c.Channel = hecChannel(c.Name, c.Host, base, c.Index)
	}
	if c.Format == "" {
		c.Format = FormatJSONL
	}
	s := &HEC{c: client, eventURL: base + "/services/collector/event", ackURL: base + "/services/collector/ack",
		hdr:  http.Header{"Authorization": {"Splunk " + token}, "X-Splunk-Request-Channel": {c.Channel}},
		host: c.Host, sourcetype: "sandtrail:" + c.Format, index: c.Index, compress: compress,
		maxBytes: cmpOr(c.MaxBytes, DefaultHECMaxBytes), maxEvent: cmpOr(c.MaxEvents, DefaultHECMaxEvents),
		ackTimeout: time.Duration(cmpOr(int64(c.AckTimeout), int64(DefaultHECAckTimeout)))}
	return s, nil
}

func hecToken(token, file string) (string, error) {
	if token != "" && file != "" {
		return "", errors.New("token and token_file both set; want one")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading token_file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" || strings.ContainsAny(token, "\r\n") {
		return "", errors.New("no token (token or token_file), or one with a line break")
	}
	return token, nil
}

// hecChannel is a UUID (RFC 9562 version 8, from SHA-256) of what names
// the sink's stream, the same across restarts.
func hecChannel(name, host, base, index string) string {
	h := sha256.Sum256([]byte("sandtrail hec channel\x00" + name + "\x00" + host + "\x00" + base + "\x00" + index))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// hecEvent is one event of a HEC request.
type hecEvent struct {
	Time       json.Number     `json:"time,omitempty"`
	Host       string          `json:"host,omitempty"`
	Source     string          `json:"source"`
	Sourcetype string          `json:"sourcetype"`
	Index      string          `json:"index,omitempty"`
	Event      json.RawMessage `json:"event"`
	Fields     hecFields       `json:"fields"`
}

// hecFields are the indexed fields of an event: strings, as HEC wants.
type hecFields struct {
	Seq        string `json:"seq"`
	Kind       string `json:"kind"`
	Checkpoint string `json:"checkpoint,omitempty"`
}

// hecTime is ts as HEC's epoch seconds, to the microsecond.
func hecTime(ts time.Time) json.Number {
	if ts.IsZero() {
		return ""
	}
	us := ts.UnixMicro()
	return json.Number(fmt.Sprintf("%d.%06d", us/1e6, us%1e6))
}

func (s *HEC) encode(e Entry) ([]byte, error) {
	ev := hecEvent{Time: hecTime(e.TS), Host: s.host, Source: "sandtrail", Sourcetype: s.sourcetype, Index: s.index,
		Event: e.Line, Fields: hecFields{Seq: strconv.FormatUint(e.Seq, 10), Kind: e.Kind}}
	if e.Checkpoint != 0 {
		ev.Fields.Checkpoint = strconv.FormatUint(e.Checkpoint, 10)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encoding seq %d: %w", e.Seq, err)
	}
	return b, nil
}

// Write posts the batch in requests under the size limits and, when the
// receiver acknowledges, waits for every request's ack.
func (s *HEC) Write(ctx context.Context, batch []Entry) error {
	evs := make([][]byte, len(batch))
	for i, e := range batch {
		b, err := s.encode(e)
		if err != nil {
			return fmt.Errorf("hec sink: %w", err)
		}
		evs[i] = b
	}
	var acks []uint64
	for _, sp := range split(evs, 0, s.maxBytes, s.maxEvent) {
		id, acked, err := s.post(ctx, bytes.Join(evs[sp.from:sp.to], nil))
		if err != nil {
			return fmt.Errorf("hec sink: seqs %d-%d: %w", batch[sp.from].Seq, batch[sp.to-1].Seq, err)
		}
		if acked {
			acks = append(acks, id)
		}
	}
	if len(acks) == 0 {
		return nil
	}
	if err := s.awaitAcks(ctx, acks); err != nil {
		return fmt.Errorf("hec sink: seqs %d-%d: %w", batch[0].Seq, batch[len(batch)-1].Seq, err)
	}
	return nil
}

// post sends one request of events and returns its ack id, if the
// receiver gave one.
func (s *HEC) post(ctx context.Context, body []byte) (ackID uint64, hasAck bool, err error) {
	rb, err := postJSON(ctx, s.c, s.eventURL, body, s.compress, s.hdr)
	if err != nil {
		return 0, false, err
	}
	return ParseHECResponse(rb)
}

// ParseHECResponse reads a HEC event endpoint's 200 answer,
// {"text":"Success","code":0[,"ackId":N]}: its ack id when it has one.
// The answer is the receiver's, untrusted: a code other than 0 is an
// error, and so is an answer that is not such an object (an empty one is
// a plain success).
func ParseHECResponse(b []byte) (ackID uint64, hasAck bool, err error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, false, nil
	}
	var r struct {
		Text  string  `json:"text"`
		Code  int     `json:"code"`
		AckID *uint64 `json:"ackId"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, false, fmt.Errorf("reading the receiver's answer: %w", err)
	}
	if r.Code != 0 {
		return 0, false, fmt.Errorf("the receiver answered code %d: %s", r.Code, responseText([]byte(r.Text)))
	}
	if r.AckID == nil {
		return 0, false, nil
	}
	return *r.AckID, true, nil
}

// ParseHECAcks reads an ack endpoint's answer, {"acks":{"N":true,...}}:
// the ids it says are acked. The answer is untrusted; one that does not
// decode is an error.
func ParseHECAcks(b []byte) (map[uint64]bool, error) {
	var r struct {
		Acks map[string]bool `json:"acks"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("reading the receiver's acks: %w", err)
	}
	out := make(map[uint64]bool, len(r.Acks))
	for k, v := range r.Acks {
		id, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading the receiver's acks: ack id %q", k)
		}
		out[id] = v
	}
	return out, nil
}

// awaitAcks polls the ack endpoint until every id is acked, for at most
// ackTimeout.
func (s *HEC) awaitAcks(ctx context.Context, ids []uint64) error {
	deadline := time.Now().Add(s.ackTimeout)
	wait := 20 * time.Millisecond
	for {
		body, _ := json.Marshal(map[string][]uint64{"acks": ids})
		rb, err := postJSON(ctx, s.c, s.ackURL, body, false, s.hdr)
		if err != nil {
			return fmt.Errorf("querying acks: %w", err)
		}
		acked, err := ParseHECAcks(rb)
		if err != nil {
			return err
		}
		pending := ids[:0:0]
		for _, id := range ids {
			if !acked[id] {
				pending = append(pending, id)
			}
		}
		if ids = pending; len(ids) == 0 {
			return nil
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%d ack ids not acknowledged within %s: %v", len(ids), s.ackTimeout, ids)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Close closes the client's idle connections.
func (s *HEC) Close() error {
	s.c.CloseIdleConnections()
	return nil
}
