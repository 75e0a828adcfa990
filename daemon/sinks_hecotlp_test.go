package daemon

import (
	"context"
	"strings"
	"testing"
)

// TestNewSinkHECAndOTLP: the hec and otlp entries of the config make their
// sinks, and a bad one is an error naming the sink.
func TestNewSinkHECAndOTLP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sc      SinkConfig
		wantErr string
	}{
		{"hec", SinkConfig{Name: "splunk", Type: "hec", URL: "https://splunk.example:8088", Token: "t", Index: "main", Format: "ocsf"}, ""},
		{"hec without a token", SinkConfig{Name: "splunk", Type: "hec", URL: "https://splunk.example:8088"}, "sink splunk: hec sink: no token"},
		{"hec over remote http", SinkConfig{Name: "splunk", Type: "hec", URL: "http://splunk.example:8088", Token: "t"}, "use https"},
		{"otlp", SinkConfig{Name: "otel", Type: "otlp", URL: "http://127.0.0.1:4318", Headers: map[string]string{"x-tenant": "a"}}, ""},
		{"otlp without a url", SinkConfig{Name: "otel", Type: "otlp"}, "sink otel: otlp sink: url"},
		{"otlp with a bad compression", SinkConfig{Name: "otel", Type: "otlp", URL: "http://127.0.0.1:4318", Compression: "lz4"}, "compression"},
		{"an unknown type", SinkConfig{Name: "x", Type: "kafka"}, "want file, stdout, nats, hec, otlp or syslog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newSink(context.Background(), tc.sc, "host1")
			if tc.wantErr == "" && err != nil {
				t.Fatalf("newSink = %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("newSink = %v, want an error with %q", err, tc.wantErr)
			}
			if s != nil {
				s.Close()
			}
		})
	}
}
