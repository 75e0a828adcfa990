package sink

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckpoints(t *testing.T) {
	in := `{"seq":0}
{"sandtrail_checkpoint":{"size":4,"note":"a\n4\nr\n\n— s x\n"}}
{"seq":1}
{"sandtrail_checkpoint":{"size":9,"note":"a\n9\nr\n\n— s y\n"}}
{"sandtrail_checkpoint":{"size":4,"note":"a\n4\nr\n\n— s x\n"}}
`
	got, err := Checkpoints(strings.NewReader(in))
	if err != nil || len(got) != 2 || !bytes.Contains(got[0], []byte("\n9\n")) {
		t.Fatalf("Checkpoints = %q, %v; want the notes of sizes 9 and 4, newest first", got, err)
	}
	for _, bad := range []string{`{"sandtrail_checkpoint":{"size":1}}`, `{"sandtrail_checkpoint":`,
		`<134>1 - h sandtrail - checkpoint [x] {"sandtrail_checkpoint":{"size":2`} {
		if _, err := Checkpoints(strings.NewReader(bad)); err == nil {
			t.Errorf("Checkpoints(%q) = nil error", bad)
		}
	}
}

// TestCheckpointsOfEveryReceiver: the checkpoints of each receiver's
// export, as it stores the sinks' lines: the file sink's JSON lines, an
// rsyslog file of RFC 5424 messages (the line after the structured
// data), the OpenTelemetry Collector's file exporter (the line as a
// log record's string body), HEC events as Splunk exports them (the line
// as the event object).
func TestCheckpointsOfEveryReceiver(t *testing.T) {
	line := `{"sandtrail_checkpoint":{"size":7,"note":"a\n7\nr\n\n— s x\n"}}`
	body, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	for name, export := range map[string]string{
		"file":   `{"seq":6}` + "\n" + line + "\n",
		"syslog": `<134>1 2026-12-02T10:00:00.000001Z web1 sandtrail 42 checkpoint [sandtrail@32473 checkpoint="7" host="web1"] ` + line + "\n",
		"otlp": `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"{\"seq\":6}"}},{"body":{"stringValue":` +
			string(body) + `},"attributes":[{"key":"sandtrail.checkpoint","value":{"intValue":"7"}}]}]}]}]}` + "\n",
		"hec": `{"time":1.5,"host":"web1","source":"sandtrail","event":` + line + `,"fields":{"checkpoint":"7"}}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Checkpoints(strings.NewReader(export))
			if err != nil || len(got) != 1 || !bytes.Contains(got[0], []byte("\n7\n")) {
				t.Fatalf("Checkpoints = %q, %v; want the note of size 7", got, err)
			}
		})
	}
}

// TestCheckpointsNotFromEvents: a checkpoint an agent wrote into an
// event's strings (an argv) is no checkpoint, in every receiver's export:
// only where a sink writes one does one count.
func TestCheckpointsNotFromEvents(t *testing.T) {
	forged := `{"sandtrail_checkpoint":{"size":99999999,"note":"forged"}}`
	ev, err := json.Marshal(map[string]any{"seq": 5, "kind": "process.exec", "proc": map[string]any{"argv": []string{"sh", "-c", forged}}})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(string(ev))
	if err != nil {
		t.Fatal(err)
	}
	for name, export := range map[string]string{
		"file":   string(ev) + "\n",
		"syslog": `<134>1 2026-12-02T10:00:00.000001Z web1 sandtrail 42 process.exec [sandtrail@32473 seq="5" host="web1"] ` + string(ev) + "\n",
		"otlp":   `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":` + string(body) + `}}]}]}]}` + "\n",
		"hec":    `{"time":1.5,"host":"web1","event":` + string(ev) + "}\n",
		"text":   `a line that is not JSON ` + string(body) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := Checkpoints(strings.NewReader(export)); err != nil || len(got) != 0 {
				t.Errorf("Checkpoints = %q, %v; want none: the agent wrote it", got, err)
			}
		})
	}
}

// FuzzCheckpoints: an export is untrusted bytes; reading one never panics.
func FuzzCheckpoints(f *testing.F) {
	f.Add([]byte(`{"sandtrail_checkpoint":{"size":4,"note":"a\n4\nr\n\n— s x\n"}}` + "\n{\"seq\":3}\n"))
	f.Add([]byte(`{"sandtrail_checkpoint":{"size":-1}}`))
	f.Add([]byte(`{"a":["{\"sandtrail_checkpoint\":{\"size\":3,\"note\":\"n\"}}"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cps, err := Checkpoints(bytes.NewReader(b))
		if err == nil && len(cps) > maxHeld {
			t.Fatalf("%d checkpoints, more than %d", len(cps), maxHeld)
		}
	})
}
