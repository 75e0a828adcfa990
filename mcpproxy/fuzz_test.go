package mcpproxy

import (
	"bytes"
	"testing"
	"time"
)

var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n",
	`{"jsonrpc":"2.0","id":"a","result":{"content":[],"isError":true}}` + "\r\n",
	`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}},{"jsonrpc":"2.0","method":"n"}]` + "\n",
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\u00e9\"\\"}}` + "\n\n",
	`{"id":0,"method":"initialize","params":{}}` + "\n" + `{"id":0,"result":{"serverInfo":{"name":"s"}}}`,
	`{broken` + "\n" + `[]` + "\n" + `[1,"a",null]` + "\n" + `{"a":[{"b":"]"}]}`,
	`{"\u0069d":1,"method":"tools\/call","params":{"name":"x","name":"y"}}` + "\n",
	"\n\n  \n",
}

// FuzzStream feeds bytes through a Stream in chunks of a given size: it
// never panics; without a refusal policy it forwards exactly its input and
// its lines are the input's; with one, what it forwards parses as lines.
func FuzzStream(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint8(i*7+1))
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		n := int(size%64) + 1
		plain := Stream{Limit: 256}
		held := Stream{Limit: 256, Refuse: func(tool string) bool { return tool == "x" }}
		var fwd, lines, heldFwd bytes.Buffer
		q := newQueue(Options{}.withDefaults())
		defer q.close()
		tr := newTracker(&serverName{}, q, 4)
		collect := func(step *Step, from side) {
			for _, b := range step.Forward {
				fwd.Write(b)
			}
			for i := range step.Lines {
				l := &step.Lines[i]
				if !l.Over {
					lines.Write(l.Raw)
				}
				trackLine(l, from, tr, time.Now(), time.Now())
			}
		}
		collectHeld := func(step *Step) {
			for _, b := range step.Forward {
				heldFwd.Write(b)
			}
			for i := range step.Lines {
				trackLine(&step.Lines[i], client, tr, time.Now(), time.Now())
			}
		}
		for i := 0; i < len(data); i += n {
			chunk := data[i:min(i+n, len(data))]
			collect(plain.Feed(chunk), server)
			collectHeld(held.Feed(chunk))
		}
		collect(plain.Flush(), server)
		collectHeld(held.Flush())
		tr.finish("end")
		if !bytes.Equal(fwd.Bytes(), data) {
			t.Fatalf("forwarded %q, want the input %q", fwd.Bytes(), data)
		}
		if !overLimit(data, 256) && !bytes.Equal(lines.Bytes(), data) {
			t.Fatalf("lines %q, want the input %q", lines.Bytes(), data)
		}
		if !overLimit(data, 256) && !bytes.Contains(data, []byte(`"x"`)) && !bytes.Contains(data, []byte(`\`)) && !bytes.Equal(heldFwd.Bytes(), data) {
			t.Fatalf("held stream forwarded %q, want the input %q (nothing refused)", heldFwd.Bytes(), data)
		}
		for _, l := range bytes.SplitAfter(heldFwd.Bytes(), []byte("\n")) {
			msgs, _ := Parse(l)
			for _, m := range msgs {
				if m.Kind == Request && m.Method == "tools/call" && callName(m.Method, m.Params) == "x" {
					t.Fatalf("held stream forwarded a refused call: %q", l)
				}
			}
		}
	})
}

// overLimit reports whether a line of data is longer than limit.
func overLimit(data []byte, limit int) bool {
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if len(l) > limit {
			return true
		}
	}
	return false
}

// FuzzParse checks that Parse never panics, and that the structural scan
// used for long lines reads valid JSON exactly as the validated parse does.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checked, err := parse(line, true)
		scanned, serr := parse(line, false)
		if err != nil {
			return
		}
		if serr != nil || len(scanned) != len(checked) {
			t.Fatalf("parse(%q) unvalidated = %d, %v; validated = %d messages", line, len(scanned), serr, len(checked))
		}
		for i := range checked {
			a, b := checked[i], scanned[i]
			if a.Kind != b.Kind || a.Method != b.Method || !bytes.Equal(a.ID, b.ID) || !bytes.Equal(a.Params, b.Params) || !bytes.Equal(a.Raw, b.Raw) {
				t.Fatalf("parse(%q)[%d] differs: %+v vs %+v", line, i, a, b)
			}
			_ = callName(a.Method, a.Params)
			_ = idKey(a.ID)
			_, _, _ = outcome(&a)
		}
	})
}

// FuzzSSE checks that the event-stream splitter never panics, and that
// chunking does not change the events it finds.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"id\":1,\"result\":{}}\n\n"), uint8(3))
	f.Add([]byte("id: 1\r\ndata: a\r\ndata:b\r\n\r\n: comment\rdata: c\r\r"), uint8(1))
	f.Add([]byte("data\n\ndata: "+string(bytes.Repeat([]byte("x"), 300))+"\n\n"), uint8(10))
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		n := int(size%32) + 1
		var whole, chunked [][]byte
		var s1, s2 SSE
		s1.Limit, s2.Limit = 128, 128
		for _, ev := range s1.Feed(data) {
			whole = append(whole, append([]byte(nil), ev.Data...))
		}
		for i := 0; i < len(data); i += n {
			for _, ev := range s2.Feed(data[i:min(i+n, len(data))]) {
				chunked = append(chunked, append([]byte(nil), ev.Data...))
			}
		}
		if len(whole) != len(chunked) {
			t.Fatalf("%d events whole, %d in chunks of %d", len(whole), len(chunked), n)
		}
		for i := range whole {
			if !bytes.Equal(whole[i], chunked[i]) {
				t.Fatalf("event %d: %q whole, %q in chunks", i, whole[i], chunked[i])
			}
		}
	})
}
