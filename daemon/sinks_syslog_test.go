package daemon

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/sandtrail/sandtrail/record/sink"
)

// TestSyslogSinkConfig: a syslog sink's keys decode (strictly, as the
// binary decodes its config) into a SinkConfig, and newSink builds it or
// says what is wrong.
func TestSyslogSinkConfig(t *testing.T) {
	const yaml = `
sinks:
  - name: soc
    type: syslog
    format: ocsf
    address: logs.example:6514
    tls: true
    server_name: logs.example
    facility: auth
    sd_id: trail@32473
    max_message: 128k
    resend_age: 30s
    resend_max: 500
`
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(yaml)); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	if err := v.UnmarshalExact(&cfg); err != nil {
		t.Fatalf("UnmarshalExact = %v", err)
	}
	want := SinkConfig{Name: "soc", Type: "syslog", Format: "ocsf", Address: "logs.example:6514", TLS: true, ServerName: "logs.example",
		Facility: "auth", SDID: "trail@32473", MaxMessage: "128k", ResendAge: 30 * time.Second, ResendMax: 500}
	if len(cfg.Sinks) != 1 || !reflect.DeepEqual(cfg.Sinks[0], want) {
		t.Fatalf("sinks = %+v, want one with %+v", cfg.Sinks, want)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*SinkConfig)
		wantErr string
	}{
		{"as configured", func(*SinkConfig) {}, ""},
		{"no address", func(c *SinkConfig) { c.Address = "" }, "needs address"},
		{"bad facility", func(c *SinkConfig) { c.Facility = "local9" }, "facility"},
		{"bad max_message", func(c *SinkConfig) { c.MaxMessage = "lots" }, "max_message"},
		{"server_name without tls", func(c *SinkConfig) { c.TLS = false }, "need tls: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := cfg.Sinks[0]
			tc.edit(&sc)
			s, err := newSink(context.Background(), sc, "web1")
			if tc.wantErr == "" {
				if _, ok := s.(*sink.Syslog); err != nil || !ok {
					t.Fatalf("newSink = %T, %v; want a *sink.Syslog", s, err)
				}
				s.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("newSink = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}
