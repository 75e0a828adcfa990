package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/daemon"
	"github.com/spf13/cobra"
)

// TestDNSConfig checks the dns.* keys through flags, environment, a config
// file and the defaults, in that order of precedence.
func TestDNSConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A file of its own in every case, so that /etc/sandtrail/config.yaml
	// of the machine plays no part.
	empty := write("empty.yaml", "log_level: info\n")
	file := write("dns.yaml", "dns:\n  enabled: false\n  upstream: [192.0.2.1, \"192.0.2.2:5353\"]\n  timeout: 2s\n  max_sessions: 7\n")
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		args    []string
		want    daemon.DNSConfig
		wantErr string
	}{
		{name: "defaults", want: daemon.DNSConfig{Enabled: true, Upstream: []string{}, Timeout: 5 * time.Second, MaxSessions: 1024}},
		{name: "file", file: file,
			want: daemon.DNSConfig{Upstream: []string{"192.0.2.1", "192.0.2.2:5353"}, Timeout: 2 * time.Second, MaxSessions: 7}},
		{name: "env over file", file: file,
			env:  map[string]string{"SANDTRAIL_DNS_UPSTREAM": "127.0.0.1:5353,[::1]:53", "SANDTRAIL_DNS_ENABLED": "true", "SANDTRAIL_DNS_TIMEOUT": "750ms"},
			want: daemon.DNSConfig{Enabled: true, Upstream: []string{"127.0.0.1:5353", "[::1]:53"}, Timeout: 750 * time.Millisecond, MaxSessions: 7}},
		{name: "flag over env", env: map[string]string{"SANDTRAIL_DNS_UPSTREAM": "127.0.0.1:5353"},
			args: []string{"--dns-upstream", "192.0.2.9,192.0.2.10"},
			want: daemon.DNSConfig{Enabled: true, Upstream: []string{"192.0.2.9", "192.0.2.10"}, Timeout: 5 * time.Second, MaxSessions: 1024}},
		{name: "zero timeout", env: map[string]string{"SANDTRAIL_DNS_TIMEOUT": "0s"}, wantErr: "dns.timeout"},
		{name: "negative max_sessions", env: map[string]string{"SANDTRAIL_DNS_MAX_SESSIONS": "-1"}, wantErr: "dns.max_sessions"},
		{name: "unknown key", file: write("bad.yaml", "dns:\n  upstreams: [192.0.2.1]\n"), wantErr: "upstreams"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			g := &globals{}
			root := &cobra.Command{Use: "sandtrail"}
			g.bind(root)
			cmd := &cobra.Command{Use: "daemon"}
			addDNSFlags(cmd)
			if err := cmd.Flags().Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			bindDNSFlags(g, cmd)
			g.configFile = tt.file
			if g.configFile == "" {
				g.configFile = empty
			}
			cfg, err := g.load()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("load() error = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("load() error = %v", err)
			}
			if !reflect.DeepEqual(cfg.DNS, tt.want) {
				t.Errorf("load().DNS = %+v, want %+v", cfg.DNS, tt.want)
			}
		})
	}
}
