package mcpproxy

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// Call is one request the proxy saw answered, refused, or a message it
// could not parse.
type Call struct {
	Server string // the server's name: Options.Server, else serverInfo.name from the initialize result
	Method string // "tools/call", "resources/read", "prompts/get"; "" for a malformed message
	Name   string // tools/call: params.name; resources/read: params.uri; prompts/get: params.name
	// Status is "ok"; "error" (result.isError true, or a JSON-RPC error
	// response); "refused" (Options.Refuse said no); "malformed"; or
	// "unanswered" (the stream ended first, or the pending table was full).
	Status    string
	Start     time.Time
	Duration  time.Duration   // request seen → response seen
	Input     json.RawMessage // tools/call: params.arguments; others: params
	Output    json.RawMessage // the result or the error object, as the server sent it
	Error     string          // for error/malformed/refused/unanswered: a short reason
	Direction string          // for malformed: "client" or "server" (who sent it)
}

// The statuses of a Call.
const (
	StatusOK         = "ok"
	StatusError      = "error"
	StatusRefused    = "refused"
	StatusMalformed  = "malformed"
	StatusUnanswered = "unanswered"
)

// Recorder receives the calls.
type Recorder interface {
	Record(Call) // called from one goroutine of the proxy; may be slow
	Lost(n int)  // n calls were dropped because the recorder fell behind (called once room is back, and at close)
}

// Options configure a proxy.
type Options struct {
	Server   string                 // name to record; empty: learn from initialize
	Refuse   func(tool string) bool // nil: refuse nothing
	Recorder Recorder
	// Queue bounds the calls waiting for the recorder; default 1024. The
	// proxy never blocks the stream on the recorder: when the queue is
	// full it drops the call and counts it.
	Queue int
	// QueueBytes bounds the Input and Output bytes of the calls waiting
	// for the recorder; default 256 MiB. A call that would pass it is
	// dropped and counted, unless the queue is empty.
	QueueBytes int64
	// Pending bounds the requests awaiting their responses, per direction
	// (per HTTP exchange); default 4096. Past it the oldest is reported
	// unanswered.
	Pending int
	// LineLimit is the longest message kept for parsing; default
	// DefaultLineLimit.
	LineLimit int
}

// The defaults of Options.
const (
	DefaultQueue      = 1024
	DefaultQueueBytes = 256 << 20
	DefaultPending    = 4096
)

func (o Options) withDefaults() Options {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.Pending <= 0 {
		o.Pending = DefaultPending
	}
	if o.LineLimit <= 0 {
		o.LineLimit = DefaultLineLimit
	}
	return o
}

// queue hands calls to the recorder on its own goroutine, dropping (and
// counting) what does not fit.
type queue struct {
	mu       sync.RWMutex // put holds it shared; close, alone
	closed   bool
	ch       chan Call
	bytes    atomic.Int64
	maxBytes int64
	lost     atomic.Int64
	rec      Recorder
	done     chan struct{}
}

func newQueue(o Options) *queue {
	q := &queue{ch: make(chan Call, o.Queue), maxBytes: o.QueueBytes, rec: o.Recorder, done: make(chan struct{})}
	go q.run()
	return q
}

// put hands a call to the recorder, or counts it lost if the queue is
// full or closed. It never blocks.
func (q *queue) put(c Call) {
	if q.rec == nil {
		return
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.lost.Add(1)
		return
	}
	size := int64(len(c.Input) + len(c.Output))
	if n := q.bytes.Add(size); n > q.maxBytes && n != size {
		q.bytes.Add(-size)
		q.lost.Add(1)
		return
	}
	select {
	case q.ch <- c:
	default:
		q.bytes.Add(-size)
		q.lost.Add(1)
	}
}

func (q *queue) run() {
	defer close(q.done)
	for c := range q.ch {
		q.bytes.Add(-int64(len(c.Input) + len(c.Output)))
		if q.rec != nil {
			q.rec.Record(c)
		}
		q.reportLost()
	}
	q.reportLost()
}

func (q *queue) reportLost() {
	if n := q.lost.Swap(0); n > 0 && q.rec != nil {
		q.rec.Lost(int(n))
	}
}

// close waits until the recorder has had every queued call. Calls put
// after it are counted lost, and not reported.
func (q *queue) close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	<-q.done
}

// serverName is the name recorded in calls, learnt from initialize when
// not given.
type serverName struct {
	fixed  string
	learnt atomic.Pointer[string]
}

func (s *serverName) get() string {
	if s.fixed != "" {
		return s.fixed
	}
	if p := s.learnt.Load(); p != nil {
		return *p
	}
	return ""
}

// learn takes serverInfo.name from an initialize result.
func (s *serverName) learn(result []byte) {
	if s.fixed != "" {
		return
	}
	members(result, func(key, val []byte) {
		if string(key) != "serverInfo" {
			return
		}
		members(val, func(key, val []byte) {
			if string(key) == "name" {
				if name, ok := jsonString(val); ok {
					s.learnt.Store(&name)
				}
			}
		})
	})
}

// tracked reports whether a method's requests become calls.
func tracked(method string) bool {
	switch method {
	case "tools/call", "resources/read", "prompts/get":
		return true
	}
	return false
}

// callName is the Name of a call: params.name, or params.uri for
// resources/read.
func callName(method string, params []byte) string {
	want := "name"
	if method == "resources/read" {
		want = "uri"
	}
	var name string
	members(params, func(key, val []byte) {
		if string(key) == want {
			name, _ = jsonString(val)
		}
	})
	return name
}

// callInput is the Input of a call: params.arguments of a tools/call, the
// params of the others.
func callInput(method string, params []byte) []byte {
	if method != "tools/call" {
		return params
	}
	var args []byte
	members(params, func(key, val []byte) {
		if string(key) == "arguments" {
			args = val
		}
	})
	return args
}

// outcome is the status, output and reason of a response.
func outcome(m *Message) (status string, output []byte, reason string) {
	if m.Error != nil {
		reason = "error response"
		members(m.Error, func(key, val []byte) {
			if string(key) == "message" {
				if s, ok := jsonString(val); ok {
					reason = s
				}
			}
		})
		return StatusError, m.Error, reason
	}
	status = StatusOK
	members(m.Result, func(key, val []byte) {
		if string(key) == "isError" {
			if string(trimSpace(val)) == "true" {
				status, reason = StatusError, "result.isError"
			} else {
				status, reason = StatusOK, ""
			}
		}
	})
	return status, m.Result, reason
}

// clone copies b, keeping nil nil.
func clone(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}
