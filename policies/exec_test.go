package policies

import (
	"slices"
	"strings"
	"testing"
)

func TestExecEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		want    []string
		wantErr string
	}{
		{name: "absent", yaml: "version: 1\n", want: nil},
		{name: "names", yaml: "exec:\n  env: [LD_PRELOAD, http_proxy]\n", want: []string{"LD_PRELOAD", "http_proxy"}},
		{name: "equals sign", yaml: "exec:\n  env: [\"A=B\"]\n", wantErr: "exec.env[0]: invalid name"},
		{name: "empty", yaml: "exec:\n  env: [\"\"]\n", wantErr: "exec.env[0]: invalid name"},
		{name: "twice", yaml: "exec:\n  env: [X, X]\n", wantErr: "exec.env[1]: \"X\" is listed twice"},
		{name: "too many", yaml: "exec:\n  env: [" + strings.Repeat("A,", 128) + "B]\n", wantErr: "exec.env: 129 names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tc.yaml, err)
			}
			e, err := New(p)
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			if got := e.ExecEnv(); !slices.Equal(got, tc.want) {
				t.Errorf("ExecEnv() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExecEnvDefault checks the shipped policies' exec.env: the loader and
// interpreter variables, and the proxies in both cases.
func TestExecEnvDefault(t *testing.T) {
	want := []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GLIBC_TUNABLES", "NODE_OPTIONS",
		"PYTHONPATH", "PYTHONSTARTUP", "BASH_ENV", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"}
	for _, path := range []string{"", "strict.yaml"} {
		p, err := Load(path)
		if err != nil {
			t.Fatalf("Load(%q) = %v", path, err)
		}
		e, err := New(p)
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		if got := e.ExecEnv(); !slices.Equal(got, want) {
			t.Errorf("Load(%q).ExecEnv() = %q, want %q", path, got, want)
		}
	}
}
