package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestDoctorCLI runs doctor as the CLI does: its JSON and its table, the
// exit status that follows from them, the policy's require list, and its
// usage errors. What this kernel has decides the expected status; the
// decision itself is tested in daemon with kernels made up.
func TestDoctorCLI(t *testing.T) {
	dir := t.TempDir()
	requires := filepath.Join(dir, "requires.yaml")
	if err := os.WriteFile(requires, []byte("require: [unix_enforce]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("require: [unix_enforc]\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// diagnosis is what doctor's JSON must hold.
	type diagnosis struct {
		Kernel     *event.Kernel `json:"kernel"`
		ProbeError string        `json:"probe_error"`
		Policy     string        `json:"policy"`
		Require    []string      `json:"require"`
		Unmet      []string      `json:"unmet"`
		Nearest    string        `json:"nearest"`
		SockDiag   []struct {
			Name string `json:"name"`
		} `json:"sock_diag"`
	}
	// wantCode is the status doctor must exit with for what it printed.
	wantCode := func(d diagnosis) int {
		switch {
		case d.Kernel == nil:
			return exitFailed
		case len(d.Unmet) > 0:
			return exitCannotRun
		}
		return 0
	}
	for _, tt := range []struct {
		name, policy string
		require      []string
	}{
		{"embedded policy", "", []string{}},
		{"a policy that requires unix_enforce", requires, []string{event.CapUnixEnforce}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"doctor"}
			if tt.policy != "" {
				args = append(args, "--policy", tt.policy)
			}
			out, err := policyCLI(t, append(args, "--format", "json")...)
			var d diagnosis
			if jerr := json.Unmarshal([]byte(out), &d); jerr != nil {
				t.Fatalf("doctor --format json printed no JSON (%v):\n%s", jerr, out)
			}
			if got, want := policyExitCode(err), wantCode(d); got != want {
				t.Errorf("doctor exit status = %d (%v), want %d for %s", got, err, want, out)
			}
			if d.Policy != tt.policy || !slices.Equal(d.Require, tt.require) {
				t.Errorf("doctor policy %q requires %q, want %q and %q", d.Policy, d.Require, tt.policy, tt.require)
			}
			if d.Kernel == nil && d.ProbeError == "" || d.Kernel != nil && d.Nearest == "" {
				t.Errorf("doctor JSON has kernel %v, probe_error %q, nearest %q: want a kernel and a sentence, or why not", d.Kernel, d.ProbeError, d.Nearest)
			}
			if d.Kernel != nil && d.Kernel.Missing([]string{event.CapUnixEnforce}) != nil && tt.policy == requires &&
				!slices.Contains(d.Unmet, event.CapUnixEnforce) {
				t.Errorf("doctor unmet = %q on a kernel without unix_enforce that the policy requires", d.Unmet)
			}
			if len(d.SockDiag) != 4 {
				t.Errorf("doctor sock_diag = %v, want 4 modules", d.SockDiag)
			}

			table, terr := policyCLI(t, args...)
			for _, label := range []string{"kernel ", "policy ", "cgroups ", "tracefs ", "sock_diag ", "verdict "} {
				if !strings.Contains(table, "\n"+label) && !strings.HasPrefix(table, label) {
					t.Errorf("doctor's table has no %q row:\n%s", label, table)
				}
			}
			if policyExitCode(terr) != policyExitCode(err) {
				t.Errorf("doctor's table exits %d, its JSON %d", policyExitCode(terr), policyExitCode(err))
			}
		})
	}

	t.Run("unknown capability in the policy", func(t *testing.T) {
		_, err := policyCLI(t, "doctor", "--policy", unknown)
		if policyExitCode(err) != exitFailed || err == nil || !strings.Contains(err.Error(), `unknown capability "unix_enforc"`) {
			t.Errorf("doctor --policy unknown.yaml = %v, want exit 1 naming the unknown capability", err)
		}
	})
	t.Run("bad format", func(t *testing.T) {
		if _, err := policyCLI(t, "doctor", "--format", "xml"); policyExitCode(err) != exitFailed {
			t.Errorf("doctor --format xml = %v, want a usage error", err)
		}
	})
	t.Run("help", func(t *testing.T) {
		out, err := policyCLI(t, "doctor", "--help")
		if err != nil || !strings.Contains(out, "Exit status") || !strings.Contains(out, "--policy") {
			t.Errorf("doctor --help = %v, %q: want the exit statuses and --policy", err, out)
		}
	})
}
