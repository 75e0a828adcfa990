package mcpproxy

import (
	"sync"
	"time"
)

// side is who sent a message.
type side uint8

const (
	client side = iota
	server
)

func (s side) String() string {
	if s == client {
		return "client"
	}
	return "server"
}

// earlyMax bounds the responses kept because their request was not seen
// yet (stdio forwards before it parses, so a fast answer can be parsed
// before its request).
const earlyMax = 64

// pending is a request awaiting its response.
type pending struct {
	method, name string
	input        []byte
	start        time.Time
	seq          uint64
}

// answer is a response kept until its request shows up.
type answer struct {
	msg  Message // its slices copied
	seen time.Time
}

// namespace holds the requests of one side, keyed by id: the ids of the
// two sides are separate.
type namespace struct {
	pend  map[string]*pending
	order []keySeq // arrival order, for evicting the oldest
	early map[string]answer
	eord  []string
}

type keySeq struct {
	key string
	seq uint64
}

// tracker pairs requests with responses and turns them into calls.
type tracker struct {
	mu     sync.Mutex
	ns     [2]namespace
	seq    uint64
	max    int
	name   *serverName
	q      *queue
	closed bool
	// noEarly: a response whose request was not seen is dropped, not kept
	// (over HTTP a POST's requests are tracked before it is forwarded).
	noEarly bool
}

func newTracker(name *serverName, q *queue, max int) *tracker {
	t := &tracker{name: name, q: q, max: max}
	for i := range t.ns {
		t.ns[i] = namespace{pend: map[string]*pending{}, early: map[string]answer{}}
	}
	return t
}

// messages tracks the messages of one line, sent by from and seen at at.
func (t *tracker) messages(from side, msgs []Message, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Kind {
		case Request:
			t.request(from, m, at)
		case Response:
			t.response(from, m, at)
		case Invalid:
			t.emit(Call{Status: StatusMalformed, Start: at, Error: m.Err, Direction: from.String()})
		}
	}
}

// malformed reports a line that is not JSON-RPC.
func (t *tracker) malformed(from side, reason string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.emit(Call{Status: StatusMalformed, Start: at, Error: reason, Direction: from.String()})
	}
}

// refused reports a tools/call that the proxy answered itself.
func (t *tracker) refused(m *Message, at, done time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	name := callName(m.Method, m.Params)
	t.emit(Call{
		Method: m.Method, Name: name, Status: StatusRefused, Start: at, Duration: done.Sub(at),
		Input: clone(callInput(m.Method, m.Params)), Output: refusalObject(name), Error: refusalMessage(name),
	})
}

// heldBack reports a call that the proxy answered itself because its
// batch held a refused call.
func (t *tracker) heldBack(m *Message, at, done time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.emit(Call{
		Method: m.Method, Name: callName(m.Method, m.Params), Status: StatusRefused, Start: at, Duration: done.Sub(at),
		Input: clone(callInput(m.Method, m.Params)), Output: heldBackObject(), Error: heldBackMessage,
	})
}

func (t *tracker) request(from side, m *Message, at time.Time) {
	key := idKey(m.ID)
	if key == "" {
		return
	}
	ns := &t.ns[from]
	p := &pending{method: m.Method, start: at}
	if tracked(m.Method) {
		p.name = callName(m.Method, m.Params)
		p.input = clone(callInput(m.Method, m.Params))
	}
	if a, ok := ns.early[key]; ok {
		delete(ns.early, key)
		if !a.seen.Before(at) {
			t.answered(p, &a.msg, a.seen)
			return
		}
	}
	if old, ok := ns.pend[key]; ok {
		t.unanswered(old, "a request with the same id followed")
	}
	t.seq++
	p.seq = t.seq
	ns.pend[key] = p
	ns.order = append(ns.order, keySeq{key, p.seq})
	t.evict(ns)
}

// evict reports the oldest requests unanswered while there are too many.
func (t *tracker) evict(ns *namespace) {
	for len(ns.pend) > t.max && len(ns.order) > 0 {
		ks := ns.order[0]
		ns.order = ns.order[1:]
		if p, ok := ns.pend[ks.key]; ok && p.seq == ks.seq {
			delete(ns.pend, ks.key)
			t.unanswered(p, "pending table full")
		}
	}
	if len(ns.order) > 2*t.max+16 {
		kept := ns.order[:0]
		for _, ks := range ns.order {
			if p, ok := ns.pend[ks.key]; ok && p.seq == ks.seq {
				kept = append(kept, ks)
			}
		}
		ns.order = kept
	}
}

// response matches a response from one side with a request of the other.
func (t *tracker) response(from side, m *Message, at time.Time) {
	key := idKey(m.ID)
	if key == "" {
		return
	}
	ns := &t.ns[1-from]
	p, ok := ns.pend[key]
	if !ok {
		if !t.noEarly {
			t.keepEarly(ns, key, m, at)
		}
		return
	}
	delete(ns.pend, key)
	t.answered(p, m, at)
}

func (t *tracker) keepEarly(ns *namespace, key string, m *Message, at time.Time) {
	if _, ok := ns.early[key]; !ok {
		ns.eord = append(ns.eord, key)
	}
	c := Message{Kind: m.Kind, Result: clone(m.Result), Error: clone(m.Error)}
	ns.early[key] = answer{msg: c, seen: at}
	for len(ns.eord) > earlyMax {
		delete(ns.early, ns.eord[0])
		ns.eord = ns.eord[1:]
	}
}

func (t *tracker) answered(p *pending, m *Message, at time.Time) {
	if p.method == "initialize" && m.Result != nil {
		t.name.learn(m.Result)
	}
	if !tracked(p.method) {
		return
	}
	status, output, reason := outcome(m)
	t.emit(Call{
		Method: p.method, Name: p.name, Status: status, Start: p.start, Duration: at.Sub(p.start),
		Input: p.input, Output: clone(output), Error: reason,
	})
}

func (t *tracker) unanswered(p *pending, reason string) {
	if tracked(p.method) {
		t.emit(Call{Method: p.method, Name: p.name, Status: StatusUnanswered, Start: p.start, Input: p.input, Error: reason})
	}
}

func (t *tracker) emit(c Call) {
	c.Server = t.name.get()
	t.q.put(c)
}

// finish reports every request still pending as unanswered; later
// messages are ignored.
func (t *tracker) finish(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	for i := range t.ns {
		ns := &t.ns[i]
		for _, ks := range ns.order {
			if p, ok := ns.pend[ks.key]; ok && p.seq == ks.seq {
				delete(ns.pend, ks.key)
				t.unanswered(p, reason)
			}
		}
	}
}
