package mcpproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// HeldBackCode is the JSON-RPC error code that answers, over HTTP, the
// other requests of a batch that holds a refused call.
const HeldBackCode = -32002

// HTTP is the streamable-HTTP proxy that NewHTTP returns.
type HTTP struct {
	o     Options
	q     *queue
	name  *serverName
	proxy *httputil.ReverseProxy
}

var _ http.Handler = (*HTTP)(nil)

// NewHTTP returns a handler serving the streamable-HTTP transport in front
// of upstream (an HTTP MCP server's endpoint URL; every request the handler
// gets goes to that URL, with the client's query when upstream has none).
// It forwards POST, GET and DELETE with their headers (Mcp-Session-Id,
// Accept, Authorization, …: all but the hop-by-hop ones and
// Accept-Encoding, removed so that the server answers uncompressed) and
// bodies unchanged. It parses the client's POSTed JSON-RPC (one message or
// a batch) and the server's replies, application/json or
// text/event-stream (streamed through unchanged and flushed as they come,
// their data lines parsed into messages on the way), and records calls as
// Stdio does. The requests of a POST are paired with the responses in that
// POST's reply; what the reply lacks is reported unanswered.
//
// A POST that is one refused tools/call is not forwarded: the proxy
// answers it (200, application/json) with the refusal error. A batch that
// holds a refused call is not forwarded either, since its reply could not
// be merged with the proxy's answer: each refused request gets the refusal
// error and each other request an error with code HeldBackCode, all in one
// JSON array; its notifications and responses are dropped. A POST body
// longer than Options.LineLimit is forwarded unparsed and reported
// malformed, or, with a refusal policy, answered 413 without being
// forwarded. With a refusal policy the proxy also fails closed on what it
// cannot read as a server might: a body with a Content-Encoding or a
// charset other than UTF-8 is answered 415, and a malformed body in which
// a lenient reading (see Stream) finds a refused call is answered with the
// refusal; both are not forwarded.
//
// The handler is an *HTTP: Close it to hand the last calls to the Recorder.
func NewHTTP(upstream *url.URL, o Options) (http.Handler, error) {
	if upstream == nil || (upstream.Scheme != "http" && upstream.Scheme != "https") || upstream.Host == "" {
		return nil, fmt.Errorf("mcpproxy: upstream %v is not an http(s) URL", upstream)
	}
	o = o.withDefaults()
	h := &HTTP{o: o, q: newQueue(o), name: &serverName{fixed: o.Server}}
	up := *upstream
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	h.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = up.Scheme, up.Host
			pr.Out.URL.Path, pr.Out.URL.RawPath = up.Path, up.RawPath
			if up.RawQuery != "" {
				pr.Out.URL.RawQuery = up.RawQuery
			}
			pr.Out.Host = ""
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:      tr,
		FlushInterval:  -1,
		ModifyResponse: h.watchResponse,
	}
	return h, nil
}

// Close waits until the Recorder has had every call queued so far. Calls of
// exchanges still under way are dropped.
func (h *HTTP) Close() error {
	h.q.close()
	return nil
}

type exchangeKey struct{}

// ServeHTTP forwards one request and tracks its messages.
func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ex := newTracker(h.name, h.q, h.o.Pending)
	ex.noEarly = true
	defer ex.finish("response ended")
	if r.Method == http.MethodPost && r.Body != nil {
		if !h.watchRequest(w, r, ex) {
			return
		}
	}
	h.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
}

// watchRequest reads and tracks a POST's body, and answers it itself when
// it holds a refused call. It reports whether to forward the request.
func (h *HTTP) watchRequest(w http.ResponseWriter, r *http.Request, ex *tracker) bool {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.o.LineLimit)+1))
	if err != nil {
		http.Error(w, "reading the request body", http.StatusBadRequest)
		return false
	}
	if len(body) > h.o.LineLimit {
		if h.o.Refuse != nil {
			ex.malformed(client, "body longer than the limit, refused: a refusal policy is in force", at)
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return false
		}
		ex.malformed(client, "body longer than the limit, forwarded unparsed", at)
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if h.o.Refuse != nil && !readableBody(r.Header) {
		ex.malformed(client, "body encoded or in a charset the proxy does not read, refused: a refusal policy is in force", at)
		http.Error(w, "request body must be uncompressed UTF-8 while a tool policy is in force", http.StatusUnsupportedMediaType)
		return false
	}
	msgs, err := Parse(body)
	if err != nil {
		ex.malformed(client, err.Error(), at)
		if h.o.Refuse != nil {
			if refused := lenientRefused(body, h.o.Refuse); len(refused) > 0 {
				h.refuse(w, refused, indices(len(refused)), len(refused) > 1, ex, at)
				return false
			}
		}
		return true
	}
	if refused := h.refusedIn(msgs); len(refused) > 0 {
		h.refuse(w, msgs, refused, trimSpace(body)[0] == '[', ex, at)
		return false
	}
	ex.messages(client, msgs, at)
	return true
}

func (h *HTTP) refusedIn(msgs []Message) []int {
	if h.o.Refuse == nil {
		return nil
	}
	var refused []int
	for i, m := range msgs {
		if refuses(m, h.o.Refuse) {
			refused = append(refused, i)
		}
	}
	return refused
}

// readableBody reports whether a request body is what the proxy parses:
// no content coding, and UTF-8 (servers such as Express's body-parser
// inflate gzip and decode UTF-16, which the proxy would not read).
func readableBody(h http.Header) bool {
	if ce := h.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return false
	}
	_, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return h.Get("Content-Type") == ""
	}
	cs := params["charset"]
	return cs == "" || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8")
}

func indices(n int) []int {
	is := make([]int, n)
	for i := range is {
		is[i] = i
	}
	return is
}

// refuse answers a POST that holds a refused call (see NewHTTP).
func (h *HTTP) refuse(w http.ResponseWriter, msgs []Message, refused []int, batch bool, ex *tracker, at time.Time) {
	var out []byte
	if !batch {
		out = refusalError(msgs[refused[0]])
	} else {
		out = append(out, '[')
		r := 0
		for i, m := range msgs {
			if m.Kind != Request {
				continue
			}
			if len(out) > 1 {
				out = append(out, ',')
			}
			if r < len(refused) && refused[r] == i {
				out = append(out, refusalError(m)...)
				r++
				continue
			}
			out = fmt.Appendf(out, `{"jsonrpc":"2.0","id":%s,"error":%s}`, trimSpace(m.ID), heldBackObject())
		}
		out = append(out, ']')
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	done := time.Now()
	r := 0
	for i := range msgs {
		switch {
		case r < len(refused) && refused[r] == i:
			ex.refused(&msgs[i], at, done)
			r++
		case msgs[i].Kind == Request && tracked(msgs[i].Method):
			ex.heldBack(&msgs[i], at, done)
		}
	}
}

func heldBackObject() []byte {
	return fmt.Appendf(nil, `{"code":%d,"message":%q}`, HeldBackCode, heldBackMessage)
}

const heldBackMessage = "batch held back by policy: it holds a refused tool call"

// watchResponse parses the server's reply as it streams to the client.
func (h *HTTP) watchResponse(resp *http.Response) error {
	ex, _ := resp.Request.Context().Value(exchangeKey{}).(*tracker)
	if ex == nil || resp.Body == nil {
		return nil
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		resp.Body = &jsonBody{ReadCloser: resp.Body, ex: ex, limit: h.o.LineLimit}
	case "text/event-stream":
		resp.Body = &sseBody{ReadCloser: resp.Body, ex: ex, events: SSE{Limit: h.o.LineLimit}}
	}
	return nil
}

// jsonBody parses a JSON reply once it has been read whole.
type jsonBody struct {
	io.ReadCloser
	ex    *tracker
	limit int
	buf   []byte
	over  bool
	done  bool
}

func (b *jsonBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if !b.over {
		if len(b.buf)+n > b.limit {
			b.over, b.buf = true, nil
		} else {
			b.buf = append(b.buf, p[:n]...)
		}
	}
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		trackLine(&Line{Raw: b.buf, Over: b.over}, server, b.ex, time.Now(), time.Now())
	}
	return n, err
}

// sseBody parses a server-sent-event reply as it is read.
type sseBody struct {
	io.ReadCloser
	ex     *tracker
	events SSE
}

func (b *sseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		at := time.Now()
		for _, ev := range b.events.Feed(p[:n]) {
			trackLine(&Line{Raw: ev.Data, Over: ev.Over}, server, b.ex, at, at)
		}
	}
	return n, err
}
