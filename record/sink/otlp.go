package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// OTLP is a Sink that exports entries as OpenTelemetry logs over
// OTLP/HTTP in its JSON encoding: POST <endpoint>/v1/logs, gzip'd, one
// LogRecord an entry (timeUnixNano the event's ts, observedTimeUnixNano
// the send, severity INFO or WARN for an alert, body the line as a
// string, attributes sandtrail.seq, sandtrail.kind and, for a signed
// checkpoint, sandtrail.checkpoint) under the resource service.name
// sandtrail, host.name <host>; a Runner's batch is split into requests
// of at most MaxBytes. A 200 is written, unless its partialSuccess says
// the receiver rejected records, which is an error naming its message;
// any other status (a *ReceiverError, carrying the Retry-After of a 429,
// 502, 503 or 504) and a failed connection are errors, which the Runner
// retries with backoff. Duplicates after a retry carry the same
// sandtrail.seq.
type OTLP struct {
	c        *http.Client
	url      string
	hdr      http.Header
	head     []byte // the request up to its first record
	maxBytes int
	compress bool
}

var _ Sink = (*OTLP)(nil)

// OTLPConfig configures an OTLP sink.
type OTLPConfig struct {
	// Endpoint is the receiver's base (http://127.0.0.1:4318); /v1/logs
	// is appended unless it already ends so.
	Endpoint string
	// Headers are sent with every request (an authorization, a tenant);
	// with any, plain http is refused unless the host is loopback.
	Headers map[string]string
	// Host names this machine: the resource's host.name.
	Host string
	// CAFile, when set, is the only CA an https receiver's certificate
	// may chain to; otherwise the system's roots. There is no insecure
	// mode.
	CAFile string
	// MaxBytes bounds one request's body before compression (default
	// 4 MiB).
	MaxBytes int
	// Compression is gzip (the default) or none.
	Compression string
	// Timeout bounds one request (default 30s).
	Timeout time.Duration
}

// DefaultOTLPMaxBytes bounds an OTLP request by default.
const DefaultOTLPMaxBytes = 4 << 20

// Severity numbers of the OpenTelemetry log data model.
const (
	otlpSeverityInfo = 9
	otlpSeverityWarn = 13
)

// NewOTLP returns an OTLP sink of c; it checks the endpoint and reads the
// CA file, and sends nothing yet.
func NewOTLP(c OTLPConfig) (*OTLP, error) {
	u, err := parseReceiverURL(c.Endpoint, len(c.Headers) > 0)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	compress, err := gzipSetting(c.Compression)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	client, err := newHTTPClient(c.CAFile, c.Timeout)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	target := strings.TrimSuffix(u.String(), "/")
	if !strings.HasSuffix(target, "/v1/logs") {
		target += "/v1/logs"
	}
	hdr := http.Header{}
	for k, v := range c.Headers {
		if strings.ContainsAny(k+v, "\r\n") {
			return nil, fmt.Errorf("otlp sink: header %q: a line break", k)
		}
		hdr.Set(k, v)
	}
	head, err := otlpHead(c.Host)
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	return &OTLP{c: client, url: target, hdr: hdr, head: head, maxBytes: cmpOr(c.MaxBytes, DefaultOTLPMaxBytes),
		compress: compress}, nil
}

// The OTLP JSON encoding's messages, as much of them as the sink writes
// (int64 fields as decimal strings, as the encoding has them).
type (
	otlpKeyValue struct {
		Key   string       `json:"key"`
		Value otlpAnyValue `json:"value"`
	}
	otlpAnyValue struct {
		StringValue *string `json:"stringValue,omitempty"`
		IntValue    string  `json:"intValue,omitempty"`
	}
	otlpLogRecord struct {
		TimeUnixNano         string         `json:"timeUnixNano,omitempty"`
		ObservedTimeUnixNano string         `json:"observedTimeUnixNano"`
		SeverityNumber       int            `json:"severityNumber"`
		SeverityText         string         `json:"severityText"`
		Body                 otlpAnyValue   `json:"body"`
		Attributes           []otlpKeyValue `json:"attributes"`
	}
)

func otlpString(k, v string) otlpKeyValue {
	return otlpKeyValue{Key: k, Value: otlpAnyValue{StringValue: &v}}
}
func otlpInt(k string, v uint64) otlpKeyValue {
	return otlpKeyValue{Key: k, Value: otlpAnyValue{IntValue: strconv.FormatUint(v, 10)}}
}

// otlpHead is an ExportLogsServiceRequest up to its first log record: one
// resource (service.name, host.name) with one scope, sandtrail.
func otlpHead(host string) ([]byte, error) {
	res, err := json.Marshal([]otlpKeyValue{otlpString("service.name", "sandtrail"), otlpString("host.name", host)})
	if err != nil {
		return nil, err
	}
	return []byte(`{"resourceLogs":[{"resource":{"attributes":` + string(res) + `},"scopeLogs":[{"scope":{"name":"sandtrail"},"logRecords":[`), nil
}

// otlpTail closes what otlpHead opened.
const otlpTail = `]}]}]}`

func (s *OTLP) encode(e Entry, observed string) ([]byte, error) {
	line := string(e.Line)
	r := otlpLogRecord{ObservedTimeUnixNano: observed, SeverityNumber: otlpSeverityInfo, SeverityText: "INFO",
		Body: otlpAnyValue{StringValue: &line}, Attributes: []otlpKeyValue{otlpInt("sandtrail.seq", e.Seq), otlpString("sandtrail.kind", e.Kind)}}
	if !e.TS.IsZero() {
		r.TimeUnixNano = strconv.FormatInt(e.TS.UnixNano(), 10)
	}
	if e.Kind == event.KindAlert {
		r.SeverityNumber, r.SeverityText = otlpSeverityWarn, "WARN"
	}
	if e.Checkpoint != 0 {
		r.Attributes = append(r.Attributes, otlpInt("sandtrail.checkpoint", e.Checkpoint))
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding seq %d: %w", e.Seq, err)
	}
	return b, nil
}

// Write exports the batch in requests under MaxBytes.
func (s *OTLP) Write(ctx context.Context, batch []Entry) error {
	observed := strconv.FormatInt(time.Now().UnixNano(), 10)
	recs := make([][]byte, len(batch))
	for i, e := range batch {
		b, err := s.encode(e, observed)
		if err != nil {
			return fmt.Errorf("otlp sink: %w", err)
		}
		recs[i] = b
	}
	room := s.maxBytes - len(s.head) - len(otlpTail)
	for _, sp := range split(recs, 1, room, len(recs)) {
		body := append(append(bytes.Clone(s.head), bytes.Join(recs[sp.from:sp.to], []byte{','})...), otlpTail...)
		rb, err := postJSON(ctx, s.c, s.url, body, s.compress, s.hdr)
		if err == nil {
			err = ParseOTLPResponse(rb, sp.to-sp.from)
		}
		if err != nil {
			return fmt.Errorf("otlp sink: seqs %d-%d: %w", batch[sp.from].Seq, batch[sp.to-1].Seq, err)
		}
	}
	return nil
}

// ParseOTLPResponse reads a 200's ExportLogsServiceResponse (JSON) for a
// request of n records: an error when its partialSuccess rejected any,
// naming the receiver's message. The answer is untrusted: an empty one is
// a success, one that does not decode an error.
func ParseOTLPResponse(b []byte, n int) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var r struct {
		PartialSuccess *struct {
			RejectedLogRecords json.RawMessage `json:"rejectedLogRecords"`
			ErrorMessage       string          `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("reading the receiver's answer: %w", err)
	}
	if r.PartialSuccess == nil || len(r.PartialSuccess.RejectedLogRecords) == 0 {
		return nil
	}
	rejected, err := strconv.ParseInt(strings.Trim(string(r.PartialSuccess.RejectedLogRecords), `"`), 10, 64)
	if err != nil {
		return fmt.Errorf("reading the receiver's answer: rejectedLogRecords %s", responseText(r.PartialSuccess.RejectedLogRecords))
	}
	if rejected > 0 {
		return fmt.Errorf("the receiver rejected %d of %d log records: %s", rejected, n, responseText([]byte(r.PartialSuccess.ErrorMessage)))
	}
	return nil
}

// Close closes the client's idle connections.
func (s *OTLP) Close() error {
	s.c.CloseIdleConnections()
	return nil
}
