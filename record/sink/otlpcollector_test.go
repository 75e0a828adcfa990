package sink

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/sandtrail/sandtrail/record/sink/sinktest"
)

// otlpRecord is a log record as the file exporter writes it.
type otlpRecord struct {
	Host string
	otlpLogRecord
}

// attr is the record's attribute k: its string or int value.
func (r otlpRecord) attr(k string) string {
	for _, a := range r.Attributes {
		if a.Key == k {
			if a.Value.StringValue != nil {
				return *a.Value.StringValue
			}
			return a.Value.IntValue
		}
	}
	return ""
}

// collectorRecords reads every log record of every file the collector
// wrote.
func collectorRecords(t *testing.T, c *sinktest.Collector) []otlpRecord {
	t.Helper()
	var out []otlpRecord
	for _, name := range c.Files() {
		b, err := os.ReadFile(name)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// Only whole lines: the last may be still being written, or torn by
		// a SIGKILL of its collector, which then had not answered the
		// export (the sink sends it again).
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		} else {
			b = nil
		}
		for line := range bytes.Lines(b) {
			if line = bytes.TrimSpace(line); len(line) > 0 {
				out = append(out, decodeExport(t, line)...)
			}
		}
	}
	return out
}

func decodeExport(t *testing.T, line []byte) []otlpRecord {
	t.Helper()
	var req struct {
		ResourceLogs []struct {
			Resource struct {
				Attributes []otlpKeyValue `json:"attributes"`
			} `json:"resource"`
			ScopeLogs []struct {
				LogRecords []otlpLogRecord `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
	}
	if err := json.Unmarshal(line, &req); err != nil {
		t.Fatalf("the file exporter's line: %v: %.200s", err, line)
	}
	var out []otlpRecord
	for _, rl := range req.ResourceLogs {
		res := otlpRecord{otlpLogRecord: otlpLogRecord{Attributes: rl.Resource.Attributes}}
		if res.attr("service.name") != "sandtrail" {
			t.Errorf("resource service.name = %q, want sandtrail", res.attr("service.name"))
		}
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				out = append(out, otlpRecord{Host: res.attr("host.name"), otlpLogRecord: lr})
			}
		}
	}
	return out
}
