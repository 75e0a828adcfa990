package mcpproxy

import (
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		kinds   []Kind
		methods []string
		ids     []string
		wantErr bool
	}{
		{name: "request number id", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n", kinds: []Kind{Request}, methods: []string{"tools/call"}, ids: []string{"1"}},
		{name: "request string id", line: `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, kinds: []Kind{Request}, methods: []string{"ping"}, ids: []string{`"a-1"`}},
		{name: "notification", line: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kinds: []Kind{Notification}, methods: []string{"notifications/initialized"}, ids: []string{""}},
		{name: "response", line: ` {"jsonrpc":"2.0","id":7,"result":{}} ` + "\r\n", kinds: []Kind{Response}, methods: []string{""}, ids: []string{"7"}},
		{name: "error response", line: `{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}`, kinds: []Kind{Response}, methods: []string{""}, ids: []string{"7"}},
		{name: "escaped keys and method", line: `{"jsonrpc":"2.0","\u0069d":2,"met\u0068od":"tools\/call"}`, kinds: []Kind{Request}, methods: []string{"tools/call"}, ids: []string{"2"}},
		{name: "duplicate key last wins", line: `{"id":1,"method":"ping","method":"tools/call"}`, kinds: []Kind{Request}, methods: []string{"tools/call"}, ids: []string{"1"}},
		{name: "batch", line: `[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"b"} ,{"id":"x","result":1}]`, kinds: []Kind{Request, Notification, Response}, methods: []string{"a", "b", ""}, ids: []string{"1", "", `"x"`}},
		{name: "batch with a non-object", line: `[1,{"id":1,"method":"a"}]`, kinds: []Kind{Invalid, Request}, methods: []string{"", "a"}, ids: []string{"", "1"}},
		{name: "neither", line: `{"jsonrpc":"2.0"}`, kinds: []Kind{Invalid}, methods: []string{""}, ids: []string{""}},
		{name: "method not a string", line: `{"id":1,"method":3}`, kinds: []Kind{Invalid}, methods: []string{""}, ids: []string{"1"}},
		{name: "blank", line: " \r\n"},
		{name: "not json", line: `{"id":1,"method":"a"`, wantErr: true},
		{name: "two objects", line: `{"id":1}{"id":2}`, wantErr: true},
		{name: "scalar", line: `42`, wantErr: true},
		{name: "empty batch", line: `[]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, validate := range []bool{true, false} {
				msgs, err := parse([]byte(tt.line), validate)
				if (err != nil) != tt.wantErr {
					if validate || !tt.wantErr {
						t.Fatalf("parse(%q, %v) error = %v, want error %v", tt.line, validate, err, tt.wantErr)
					}
					continue // the structural scan may accept what json.Valid does not
				}
				if len(msgs) != len(tt.kinds) {
					t.Fatalf("parse(%q, %v) = %d messages, want %d", tt.line, validate, len(msgs), len(tt.kinds))
				}
				for i, m := range msgs {
					if m.Kind != tt.kinds[i] || m.Method != tt.methods[i] || string(m.ID) != tt.ids[i] {
						t.Errorf("parse(%q)[%d] = kind %d method %q id %s, want kind %d method %q id %s", tt.line, i, m.Kind, m.Method, m.ID, tt.kinds[i], tt.methods[i], tt.ids[i])
					}
				}
			}
		})
	}
}

func TestIDKey(t *testing.T) {
	same := [][2]string{{`1`, `1`}, {`1.0`, `1`}, {`"a"`, `"\u0061"`}, {` 5 `, `5`}, {`1e2`, `100`}}
	for _, p := range same {
		if a, b := idKey([]byte(p[0])), idKey([]byte(p[1])); a != b || a == "" {
			t.Errorf("idKey(%s) = %q, idKey(%s) = %q, want equal and set", p[0], a, p[1], b)
		}
	}
	differ := [][2]string{{`1`, `"1"`}, {`1`, `2`}, {`"a"`, `"A"`}}
	for _, p := range differ {
		if a, b := idKey([]byte(p[0])), idKey([]byte(p[1])); a == b {
			t.Errorf("idKey(%s) = idKey(%s) = %q, want different", p[0], p[1], a)
		}
	}
	for _, id := range []string{`null`, `{}`, `[1]`, `true`, ``} {
		if k := idKey([]byte(id)); k != "" {
			t.Errorf("idKey(%s) = %q, want none", id, k)
		}
	}
}

func TestCallFields(t *testing.T) {
	params := []byte(`{"name":"ec\u0068o","arguments":{"text":"hi"},"uri":"file:///a"}`)
	if got := callName("tools/call", params); got != "echo" {
		t.Errorf("callName(tools/call) = %q, want echo", got)
	}
	if got := callName("resources/read", params); got != "file:///a" {
		t.Errorf("callName(resources/read) = %q, want file:///a", got)
	}
	if got := string(callInput("tools/call", params)); got != `{"text":"hi"}` {
		t.Errorf("callInput(tools/call) = %s, want the arguments", got)
	}
	if got := string(callInput("prompts/get", params)); got != string(params) {
		t.Errorf("callInput(prompts/get) = %s, want the params", got)
	}
	tests := []struct {
		msg, status, reason string
	}{
		{`{"id":1,"result":{"content":[]}}`, StatusOK, ""},
		{`{"id":1,"result":{"isError":true,"content":[]}}`, StatusError, "result.isError"},
		{`{"id":1,"result":{"isError":false}}`, StatusOK, ""},
		{`{"id":1,"error":{"code":-32602,"message":"no such tool"}}`, StatusError, "no such tool"},
	}
	for _, tt := range tests {
		msgs, err := Parse([]byte(tt.msg))
		if err != nil {
			t.Fatal(err)
		}
		if status, _, reason := outcome(&msgs[0]); status != tt.status || reason != tt.reason {
			t.Errorf("outcome(%s) = %s, %q, want %s, %q", tt.msg, status, reason, tt.status, tt.reason)
		}
	}
}
