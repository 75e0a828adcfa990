package api_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/daemon/api"
)

// FuzzDecodePost feeds the API's body parser arbitrary bytes: it never
// panics, and every post it accepts makes a valid event.
func FuzzDecodePost(f *testing.F) {
	f.Add([]byte(`{"kind":"tool.invoke","tool":{"name":"bash","status":"ok","duration_ms":3},"input":"{}","output":"x"}`))
	f.Add([]byte(`{"kind":"model.io","model":{"name":"m","tokens":12},"input":"hi"}`))
	f.Add([]byte(`{"kind":"tool.invoke","tool":{"name":"x","input_summary":"s","sealed_ref":"sha256:00"},"event_id":"e-1","ts":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"kind":"tool.invoke","tool":{"name":""}}`))
	f.Add([]byte(`[{"kind":"tool.invoke"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := api.DecodePost(bytes.NewReader(b))
		if err != nil {
			return
		}
		e := p.Event("s-1", time.Unix(1700000000, 0).UTC())
		if err := e.Validate(); err != nil {
			t.Fatalf("accepted post %q makes an invalid event: %v", b, err)
		}
		if e.Tool != nil && (e.Tool.SealedRef != "" || e.Tool.InputSHA256 != "" || e.Tool.Verbosity != "") {
			t.Fatalf("accepted post %q keeps the caller's I/O fields: %+v", b, e.Tool)
		}
	})
}
