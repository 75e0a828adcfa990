package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandtrail/sandtrail/daemon/api"
	"github.com/sandtrail/sandtrail/mcpproxy"
)

// TestToolPost: a call's post always fits the API: a name cut on a
// character boundary, and I/O too large to carry whole sent as its heads,
// saying so.
func TestToolPost(t *testing.T) {
	name := "file:///" + strings.Repeat("./", 123) + "€tc/shadow"
	p := toolPost(mcpproxy.Call{Method: "resources/read", Name: name, Status: "ok", Input: []byte(`{}`), Output: []byte(`"x"`)})
	if !utf8.ValidString(p.Tool.Name) || len(p.Tool.Name) > 256+len("…") || p.Input == nil || *p.Output != `"x"` {
		t.Errorf("post of a long name: %+v", p.Tool)
	}
	big := []byte(`{"text":"` + strings.Repeat("<", api.MaxBody/2) + `"}`)
	p = toolPost(mcpproxy.Call{Method: "tools/call", Name: "read", Status: "ok", Input: []byte(`{"path":"/x"}`), Output: big})
	if p.Input != nil || p.Output != nil || !strings.HasPrefix(p.Tool.OutputSummary, `{"text":"<<<`) || !strings.Contains(p.Tool.Error, "over the") {
		t.Errorf("post of a large result: input %v, output %v, tool %+v; want the heads and why", p.Input != nil, p.Output != nil, p.Tool.Error)
	}
	if _, err := api.DecodePost(strings.NewReader(`{"kind":"tool.invoke","tool":{"name":"` + strings.Repeat("n", 5000) + `"}}`)); err != nil {
		t.Errorf("a long name is refused (%v): the daemon clips it instead", err)
	}
	p = toolPost(mcpproxy.Call{Status: mcpproxy.StatusMalformed, Direction: "server", Error: "unexpected end"})
	if p.Tool.Name != "malformed message from the server" || p.Tool.Status != "malformed" {
		t.Errorf("malformed: %+v", p.Tool)
	}
}
