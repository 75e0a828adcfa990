package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/policies"
)

// policyCLI runs sandtrail with args and returns stdout and the error.
func policyCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--data", t.TempDir()))
	err := root.Execute()
	return out.String(), err
}

func policyExitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return -1
	}
	return 0
}

// policyRegistry is an httptest server that speaks the npm registry's
// packument format (name, versions with dist.tarball, dist-tags, time) for
// one package, "demo": 1.0.0 and 1.1.0 are a year old, 1.2.0 was published
// an hour ago and is the latest.
func policyRegistry(t *testing.T) *httptest.Server {
	t.Helper()
	now := time.Now().UTC()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/demo" {
			http.NotFound(w, r)
			return
		}
		versions := map[string]any{}
		times := map[string]string{"created": now.AddDate(-1, 0, -1).Format(time.RFC3339)}
		for v, age := range map[string]time.Duration{"1.0.0": 400 * 24 * time.Hour, "1.1.0": 365 * 24 * time.Hour, "1.2.0": time.Hour} {
			versions[v] = map[string]any{
				"name": "demo", "version": v,
				"dist": map[string]any{"tarball": fmt.Sprintf("%s/demo/-/demo-%s.tgz", srv.URL, v), "shasum": "00"},
			}
			times[v] = now.Add(-age).Format(time.RFC3339Nano)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"name": "demo", "dist-tags": map[string]string{"latest": "1.2.0"},
			"versions": versions, "time": times,
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func policyFile(t *testing.T, registry string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	body := fmt.Sprintf(`sources:
  registries:
    npm: [%s/]
on_unknown_source: block
blocklist:
  - purl: pkg:npm/demo@<1.1.0
    reason: demo 1.0.x is compromised
cooldown:
  min_age: 48h
  action: block
`, registry)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyExplain(t *testing.T) {
	srv := policyRegistry(t)
	pol := policyFile(t, srv.URL)
	tests := []struct {
		name     string
		args     []string
		resolved string
		verdict  string
		rule     string
		reason   string
	}{
		{name: "allowed", args: []string{"npm:demo@~1.1.0"},
			resolved: "1.1.0", verdict: "allow", rule: "sources.registries.npm[0]", reason: "no check blocks or flags it"},
		{name: "blocklisted range", args: []string{"npm:demo@1.0.0"},
			resolved: "1.0.0", verdict: "block", rule: "blocklist[0]", reason: "demo 1.0.x is compromised"},
		{name: "inside the cooldown", args: []string{"npm:demo@^1.0.0"},
			resolved: "1.2.0", verdict: "block", rule: "cooldown.min_age", reason: "inside the 2d cooldown"},
		{name: "unknown source", args: []string{"npm:demo@~1.1.0", "--source", "https://evil.example/demo-1.1.0.tgz"},
			resolved: "1.1.0", verdict: "block", rule: "on_unknown_source", reason: "unknown source"},
		{name: "publish time given", args: []string{"npm:demo@~1.1.0", "--published", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)},
			resolved: "1.1.0", verdict: "block", rule: "cooldown.min_age"},
		{name: "purl argument", args: []string{"pkg:npm/demo@~1.1.0"},
			resolved: "1.1.0", verdict: "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"policy", "explain"}, tt.args...)
			args = append(args, "--policy", pol, "--registry", srv.URL, "--format", "json")
			out, err := policyCLI(t, args...)
			if err != nil {
				t.Fatalf("sandtrail %s = %v", strings.Join(args, " "), err)
			}
			var res policies.Explanation
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if res.Resolved != tt.resolved || string(res.Verdict) != tt.verdict || (tt.rule != "" && res.Rule != tt.rule) || !strings.Contains(res.Reason, tt.reason) {
				t.Errorf("explain %v = resolved %s, %s %q [%s], want resolved %s, %s [%s] with reason containing %q",
					tt.args, res.Resolved, res.Verdict, res.Reason, res.Rule, tt.resolved, tt.verdict, tt.rule, tt.reason)
			}
			if len(res.Checks) != 4 || res.Candidates != 3 {
				t.Errorf("explain %v = %d checks among %d candidates, want 4 among 3", tt.args, len(res.Checks), res.Candidates)
			}
		})
	}
}

func TestPolicyExplainUnapprovedRegistry(t *testing.T) {
	srv := policyRegistry(t)
	// The built-in policy does not approve the test registry.
	out, err := policyCLI(t, "policy", "explain", "npm:demo@~1.1.0", "--registry", srv.URL, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res policies.Explanation
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Verdict != "block" || res.Rule != "on_unknown_source" {
		t.Errorf("explain against an unapproved registry = %s [%s] %q, want block [on_unknown_source]", res.Verdict, res.Rule, res.Reason)
	}
}

func TestPolicyExplainText(t *testing.T) {
	srv := policyRegistry(t)
	out, err := policyCLI(t, "policy", "explain", "npm:demo@1.0.0", "--policy", policyFile(t, srv.URL), "--registry", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"resolved   1.0.0", "verdict    BLOCK", "rule       blocklist[0]", "blocklist        block", "cooldown         allow"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain text lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicyExplainVersionsFlag(t *testing.T) {
	out, err := policyCLI(t, "policy", "explain", "pypi:requests@>=2,<3", "--versions", "2.31.0,2.32.3,3.0.0",
		"--published", "2020-01-01T00:00:00Z", "--source", "https://files.pythonhosted.org/packages/requests-2.32.3.tar.gz", "--install-scripts", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res policies.Explanation
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	// The built-in policy flags install scripts.
	if res.Resolved != "2.32.3" || res.Verdict != "flag" || res.Rule != "install_scripts" {
		t.Errorf("explain = %s %s [%s], want 2.32.3 flag [install_scripts]", res.Resolved, res.Verdict, res.Rule)
	}
}

func TestPolicyExplainErrors(t *testing.T) {
	srv := policyRegistry(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "bad argument", args: []string{"lodash"}, want: "want ECOSYSTEM:NAME@SPEC"},
		{name: "unknown ecosystem", args: []string{"gem:rails@7"}, want: "unknown ecosystem"},
		{name: "no such package", args: []string{"npm:nope@1", "--registry", srv.URL}, want: "not found"},
		{name: "no match", args: []string{"npm:demo@^9", "--registry", srv.URL}, want: "no version matches"},
		{name: "bad published", args: []string{"npm:demo@1.0.0", "--registry", srv.URL, "--published", "yesterday"}, want: "--published"},
		{name: "deb needs versions", args: []string{"deb:curl@>= 7"}, want: "pass --versions"},
		{name: "bad policy", args: []string{"npm:demo@1.0.0", "--policy", "../../policies/testdata/bad-values.yaml"}, want: "bad-values.yaml:17: blocklist[2].range"},
		{name: "empty spec after @", args: []string{"npm:demo@", "--versions", "1.0.0"}, want: "empty version after @"},
		{name: "glob purl", args: []string{"pkg:npm/demo*@1"}, want: "not a pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policyCLI(t, append([]string{"policy", "explain"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("explain %v = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestPolicyCheck(t *testing.T) {
	out, err := policyCLI(t, "policy", "check", "../../policies/default.yaml")
	if err != nil || !strings.Contains(out, "valid") {
		t.Errorf("check default.yaml = %q, %v, want valid", out, err)
	}

	out, err = policyCLI(t, "policy", "check", "../../policies/testdata/bad-values.yaml", "--format", "json")
	if code := policyExitCode(err); code != exitInvalid {
		t.Fatalf("check bad-values.yaml exit code = %d (%v), want %d", code, err, exitInvalid)
	}
	var res struct {
		Valid  bool `json:"valid"`
		Errors []struct {
			Line    int    `json:"line"`
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("check output is not JSON: %v\n%s", err, out)
	}
	found := false
	for _, e := range res.Errors {
		if e.Line == 0 || e.Field == "" {
			t.Errorf("check error %+v lacks a line or field", e)
		}
		found = found || (e.Line == 17 && e.Field == "blocklist[2].range" && strings.Contains(e.Message, `invalid npm range ">>1"`))
	}
	if res.Valid || !found {
		t.Errorf("check bad-values.yaml = %+v, want invalid with blocklist[2].range at line 17", res)
	}

	out, err = policyCLI(t, "policy", "check", "../../policies/testdata/bad-unknown-fields.yaml")
	if policyExitCode(err) != exitInvalid || !strings.Contains(out, "bad-unknown-fields.yaml:8: cooldown.min_agee: unknown field") {
		t.Errorf("check bad-unknown-fields.yaml = %q, %v", out, err)
	}

	_, err = policyCLI(t, "policy", "check", filepath.Join(t.TempDir(), "missing.yaml"))
	if code := policyExitCode(err); code != exitFailed {
		t.Errorf("check missing file exit code = %d (%v), want %d", code, err, exitFailed)
	}
}

func TestPolicyShow(t *testing.T) {
	out, err := policyCLI(t, "policy", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"on_unknown_source: block", "min_age: 48h", "https://registry.npmjs.org/", "agent_uid0: alert"} {
		if !strings.Contains(out, want) {
			t.Errorf("policy show lacks %q", want)
		}
	}
	// What show prints is itself a valid policy.
	p := filepath.Join(t.TempDir(), "shown.yaml")
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := policyCLI(t, "policy", "check", p); err != nil {
		t.Errorf("check of policy show output = %q, %v, want valid", out, err)
	}
}
