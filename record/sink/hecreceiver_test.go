package sink

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// hecReceiver is the HEC receiver of the tests, written to Splunk's HTTP
// Event Collector protocol, since the OpenTelemetry Collector's
// splunkhecreceiver cannot be built here (test/otelcol/README.md): POST
// /services/collector/event with Authorization: Splunk <token>, a body
// (gzip'd with Content-Encoding: gzip) of event objects one after another,
// each decoded strictly; {"text":"Success","code":0} or, with acks on,
// {"text":"Success","code":0,"ackId":N} per channel
// (X-Splunk-Request-Channel required, else 400 code 10 "Data channel is
// missing"); POST /services/collector/ack {"acks":[...]} answering
// {"acks":{"N":bool}}, each ack true only from its second query on, so
// that the sink must poll. What it took survives a kill (the store is the
// test's), as an indexer's does.
type hecReceiver struct {
	token string
	acks  bool

	mu       sync.Mutex
	events   []hecTestEvent
	requests int
	channels map[string]bool
	nextAck  map[string]uint64
	queried  map[string]map[uint64]bool // channel → ack ids queried once
	gzipped  int
	ackPolls int

	srv *http.Server
}

// hecTestEvent is an event as the receiver decoded it.
type hecTestEvent struct {
	Time       json.Number       `json:"time"`
	Host       string            `json:"host"`
	Source     string            `json:"source"`
	Sourcetype string            `json:"sourcetype"`
	Index      string            `json:"index"`
	Event      json.RawMessage   `json:"event"`
	Fields     map[string]string `json:"fields"`
}

func newHECReceiver(token string, acks bool) *hecReceiver {
	return &hecReceiver{token: token, acks: acks, channels: map[string]bool{}, nextAck: map[string]uint64{},
		queried: map[string]map[uint64]bool{}}
}

func hecAnswer(w http.ResponseWriter, status int, text string, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"text":%q,"code":%d}`, text, code)
}

func (h *hecReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		hecAnswer(w, http.StatusMethodNotAllowed, "Method not allowed", 0)
		return
	}
	if r.Header.Get("Authorization") != "Splunk "+h.token {
		hecAnswer(w, http.StatusUnauthorized, "Invalid authorization", 3)
		return
	}
	ch := r.Header.Get("X-Splunk-Request-Channel")
	if h.acks && ch == "" {
		hecAnswer(w, http.StatusBadRequest, "Data channel is missing", 10)
		return
	}
	switch r.URL.Path {
	case "/services/collector/event":
		h.event(w, r, ch)
	case "/services/collector/ack":
		h.ack(w, r, ch)
	default:
		hecAnswer(w, http.StatusNotFound, "The requested URL was not found on this server.", 404)
	}
}

func (h *hecReceiver) event(w http.ResponseWriter, r *http.Request, ch string) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			hecAnswer(w, http.StatusBadRequest, "Invalid data format", 6)
			return
		}
		body = zr
	}
	var evs []hecTestEvent
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	for dec.More() {
		var e hecTestEvent
		if err := dec.Decode(&e); err != nil || len(e.Event) == 0 {
			hecAnswer(w, http.StatusBadRequest, fmt.Sprintf("Invalid data format: %v", err), 6)
			return
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		hecAnswer(w, http.StatusBadRequest, "No data", 5)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, evs...)
	h.requests++
	h.channels[ch] = true
	if r.Header.Get("Content-Encoding") == "gzip" {
		h.gzipped++
	}
	if !h.acks {
		hecAnswer(w, http.StatusOK, "Success", 0)
		return
	}
	id := h.nextAck[ch]
	h.nextAck[ch]++
	fmt.Fprintf(w, `{"text":"Success","code":0,"ackId":%d}`, id)
}

func (h *hecReceiver) ack(w http.ResponseWriter, r *http.Request, ch string) {
	var q struct {
		Acks []uint64 `json:"acks"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || len(q.Acks) == 0 {
		hecAnswer(w, http.StatusBadRequest, "Invalid data format", 6)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ackPolls++
	if h.queried[ch] == nil {
		h.queried[ch] = map[uint64]bool{}
	}
	out := map[string]bool{}
	for _, id := range q.Acks {
		out[strconv.FormatUint(id, 10)] = id < h.nextAck[ch] && h.queried[ch][id]
		h.queried[ch][id] = true
	}
	json.NewEncoder(w).Encode(map[string]any{"acks": out})
}

// serve starts serving on addr ("127.0.0.1:0" for a free port) and
// returns the address.
func (h *hecReceiver) serve(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = &http.Server{Handler: h}
	go h.srv.Serve(ln)
	t.Cleanup(h.kill)
	return ln.Addr().String()
}

// kill closes the listener and every connection at once, requests in
// flight included.
func (h *hecReceiver) kill() {
	if h.srv != nil {
		h.srv.Close()
	}
}

// seqCounts counts the events of each fields.seq (checkpoints left out).
func (h *hecReceiver) seqCounts(t *testing.T) map[uint64]int {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := map[uint64]int{}
	for _, e := range h.events {
		if e.Fields["checkpoint"] != "" {
			continue
		}
		seq, err := strconv.ParseUint(e.Fields["seq"], 10, 64)
		if err != nil {
			t.Fatalf("an event's fields.seq %q: %v", e.Fields["seq"], err)
		}
		n[seq]++
	}
	return n
}

func (h *hecReceiver) snapshot() []hecTestEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hecTestEvent(nil), h.events...)
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
