package pkgview

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// rowSum is what a join test checks of a row.
type rowSum struct {
	eco, name, version, seen string
	alerts                   []string
}

func sumRows(v *View) []rowSum {
	var out []rowSum
	for _, p := range v.Packages {
		out = append(out, rowSum{p.Ecosystem, p.Name, p.Version, p.Seen, p.Alerts})
	}
	return out
}

// alertSum is an alert's rule and refs.
func alertSum(as []*event.Event) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s%v", a.Alert.RuleID, a.Alert.Refs))
	}
	return out
}

func TestJoin(t *testing.T) {
	mm := []string{RuleMismatch}
	un := []string{RuleUnverified}
	mmun := []string{RuleMismatch, RuleUnverified}
	unmm := []string{RuleUnverified, RuleMismatch}
	tests := []struct {
		name   string
		events func(r *rec)
		rows   []rowSum
		alerts []string
	}{
		{"npm joined on name, version and SRI hash", func(r *rec) {
			r.fetch("npm", "lodash", "4.17.21", sriA, "served")
			r.install("npm", "lodash", "4.17.21", sriA, 11)
		}, []rowSum{{"npm", "lodash", "4.17.21", SeenBoth, nil}}, nil},
		{"pypi name normalised, sha256 case and prefix", func(r *rec) {
			r.fetch("pypi", "requests-oauthlib", "1.0", shaA, "served")
			r.install("pypi", "Requests_OAuthlib", "1.0", shaAUp, 11)
		}, []rowSum{{"pypi", "Requests_OAuthlib", "1.0", SeenBoth, nil}}, nil},
		{"cargo hex cksum against sha256: and _ for -", func(r *rec) {
			r.fetch("cargo", "serde-derive", "1.0.0", hexA, "served")
			r.install("cargo", "serde_derive", "1.0.0", shaA, 11)
		}, []rowSum{{"cargo", "serde_derive", "1.0.0", SeenBoth, nil}}, nil},
		{"npm v-prefixed version is the same version", func(r *rec) {
			r.fetch("npm", "x", "1.0.0", sriA, "served")
			r.install("npm", "x", "v1.0.0", sriA, 11)
		}, []rowSum{{"npm", "x", "v1.0.0", SeenBoth, nil}}, nil},
		{"mismatch by hash", func(r *rec) {
			r.fetch("npm", "lodash", "4.17.21", sriA, "served")
			r.install("npm", "lodash", "4.17.21", sriB, 11)
		}, []rowSum{{"npm", "lodash", "4.17.21", SeenBoth, mmun}}, []string{"shim_mirror_mismatch[1 0]", "unverified_install[1]"}},
		{"mismatch by hash: sha256 against hex", func(r *rec) {
			r.fetch("deb", "curl", "7.88.1-10", shaA, "served")
			r.install("deb", "curl", "7.88.1-10", hexB, 11)
		}, []rowSum{{"deb", "curl", "7.88.1-10", SeenBoth, mmun}}, []string{"shim_mirror_mismatch[1 0]", "unverified_install[1]"}},
		{"no mismatch when one served fetch matches", func(r *rec) {
			r.fetch("pypi", "a", "1.0", shaB, "served")
			r.fetch("pypi", "a", "1.0", shaA, "served")
			r.install("pypi", "a", "1.0", shaA, 11)
		}, []rowSum{{"pypi", "a", "1.0", SeenBoth, nil}}, nil},
		{"no mismatch when the hashes cannot be compared", func(r *rec) {
			r.fetch("npm", "a", "1.0.0", sriA, "served")
			r.install("npm", "a", "1.0.0", shaB, 11)
			r.fetch("npm", "b", "1.0.0", sriA, "served")
			r.install("npm", "b", "1.0.0", "", 11)
		}, []rowSum{{"npm", "a", "1.0.0", SeenBoth, nil}, {"npm", "b", "1.0.0", SeenBoth, nil}}, nil},
		{"mismatch by hash when the fetch comes after the install", func(r *rec) {
			r.install("npm", "lodash", "4.17.21", sriB, 11)
			r.fetch("npm", "lodash", "4.17.21", sriA, "served")
		}, []rowSum{{"npm", "lodash", "4.17.21", SeenBoth, unmm}}, []string{"unverified_install[0]", "shim_mirror_mismatch[0 1]"}},
		{"mismatch by version", func(r *rec) {
			r.fetch("npm", "lodash", "4.17.21", sriA, "served")
			r.install("npm", "lodash", "4.17.99", sriA, 11)
		}, []rowSum{{"npm", "lodash", "4.17.21", SeenMirrorOnly, nil}, {"npm", "lodash", "4.17.99", SeenShimOnly, mm}},
			[]string{"shim_mirror_mismatch[1 0]"}},
		{"mismatch by version when another version is served later", func(r *rec) {
			r.install("pypi", "a", "2.0", shaA, 11)
			r.fetch("pypi", "a", "1.0", shaB, "served")
		}, []rowSum{{"pypi", "a", "2.0", SeenShimOnly, unmm}, {"pypi", "a", "1.0", SeenMirrorOnly, nil}},
			[]string{"unverified_install[0]", "shim_mirror_mismatch[0 1]"}},
		{"mismatch: the mirror refused that version", func(r *rec) {
			r.fetch("npm", "evil", "1.0.0", sriA, "cooldown")
			r.install("npm", "evil", "1.0.0", sriA, 11)
		}, []rowSum{{"npm", "evil", "1.0.0", SeenBoth, mmun}}, []string{"shim_mirror_mismatch[1 0]", "unverified_install[1]"}},
		{"one alert per row", func(r *rec) {
			r.fetch("npm", "a", "1.0.0", sriA, "served")
			r.install("npm", "a", "1.0.0", sriB, 11)
			r.install("npm", "a", "1.0.0", sriB, 12)
			r.fetch("npm", "a", "1.0.0", sriA, "served")
		}, []rowSum{{"npm", "a", "1.0.0", SeenBoth, mmun}}, []string{"shim_mirror_mismatch[1 0]", "unverified_install[1]"}},
		{"mirror_only is not an alert", func(r *rec) {
			r.fetch("cargo", "cc", "1.0.83", hexA, "served")
		}, []rowSum{{"cargo", "cc", "1.0.83", SeenMirrorOnly, nil}}, nil},
		{"shim_only is an unverified install", func(r *rec) {
			r.install("pypi", "local-thing", "0.1", shaA, 11)
		}, []rowSum{{"pypi", "local-thing", "0.1", SeenShimOnly, un}}, []string{"unverified_install[0]"}},
		{"a reinstall from the cache is verified by the session's earlier fetch", func(r *rec) {
			r.fetch("npm", "a", "1.0.0", sriA, "served")
			r.install("npm", "a", "1.0.0", sriA, 11)
			r.install("npm", "a", "1.0.0", sriA, 12)
		}, []rowSum{{"npm", "a", "1.0.0", SeenBoth, nil}}, nil},
		{"a fetch the mirror served unverified does not verify", func(r *rec) {
			r.fetch("pypi", "a", "1.0", shaA, "served").Pkg.Verified = event.Bool(false)
			r.install("pypi", "a", "1.0", shaA, 11)
		}, []rowSum{{"pypi", "a", "1.0", SeenBoth, un}}, []string{"unverified_install[1]"}},
		{"a verified fetch of another version with the same hash verifies", func(r *rec) {
			r.fetch("npm", "real", "1.0.0", sriA, "served")
			r.install("npm", "alias", "1.0.0", sriA, 11)
		}, []rowSum{{"npm", "real", "1.0.0", SeenMirrorOnly, nil}, {"npm", "alias", "1.0.0", SeenShimOnly, nil}}, nil},
		{"a local package (file:) is exempt", func(r *rec) {
			r.install("npm", "ws-a", "0.1.0", "", 11).Pkg.SourceURL = "file:packages/a"
		}, []rowSum{{"npm", "ws-a", "0.1.0", SeenShimOnly, nil}}, nil},
		{"pypi core metadata is not an artifact", func(r *rec) {
			r.add(event.KindPkgFetch, event.SourceMirror, func(e *event.Event) {
				e.Pkg = &event.Pkg{Ecosystem: "pypi", Name: "a", Resolved: "1.0", Hash: shaB, Outcome: "served",
					SourceURL: "https://files.example.invalid/a-1.0-py3-none-any.whl.metadata"}
			})
			r.install("pypi", "a", "1.0", shaA, 11)
		}, []rowSum{{"pypi", "a", "1.0", SeenShimOnly, un}}, []string{"unverified_install[1]"}},
		{"blocked requests are rows of their own", func(r *rec) {
			r.blocked("npm", "evil", "^1", "blocklist")
			r.blocked("npm", "evil", "^1", "blocklist")
			r.blocked("pypi", "", "https://example.invalid/x.tar.gz", "direct_url")
		}, []rowSum{{"npm", "evil", "", SeenBlocked, nil}, {"npm", "evil", "", SeenBlocked, nil},
			{"pypi", "", "", SeenBlocked, nil}}, nil},
		{"other sessions are skipped", func(r *rec) {
			r.fetch("npm", "a", "1.0.0", sriA, "served")
			r.install("npm", "a", "1.0.0", sriB, 11).SessionID = "other"
		}, []rowSum{{"npm", "a", "1.0.0", SeenMirrorOnly, nil}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			v := build(r.evs)
			if got := sumRows(v); fmt.Sprint(got) != fmt.Sprint(tt.rows) {
				t.Errorf("Build rows = %v, want %v", got, tt.rows)
			}
			if got := alertSum(v.Alerts); !slices.Equal(got, tt.alerts) {
				t.Errorf("Build alerts = %v, want %v", got, tt.alerts)
			}
		})
	}
}

func TestRowFields(t *testing.T) {
	r := newRec("S")
	r.fetch("npm", "lodash", "4.17.21", sriA, "served")
	r.install("npm", "lodash", "4.17.21", sriA, 11)
	r.fetch("npm", "evil", "6.6.6", sriB, "blocked").Pkg.Rule = "blocklist"
	r.blocked("pypi", "bad", "==1", "blocklist")
	v := build(r.evs)
	if v.SessionID != "S" || len(v.Packages) != 3 {
		t.Fatalf("Build = session %q, %d packages, want S, 3", v.SessionID, len(v.Packages))
	}
	p := v.Packages[0]
	if p.UpstreamURL != "https://registry.example.invalid/lodash-4.17.21" || p.SourceURL != "http://127.0.0.1:8480/npm/lodash" ||
		p.Hash != sriA || p.MirrorHash != sriA || p.Verified == nil || !*p.Verified || p.Outcome != "served" ||
		p.Pid != 11 || p.UID == nil || *p.UID != 1000 || p.Requested != "^4.17.21" || p.Direct == nil || !*p.Direct ||
		!slices.Equal(p.Seqs, []uint64{0, 1}) || !p.Time.Equal(t0) {
		t.Errorf("joined row = %+v", p)
	}
	if p := v.Packages[1]; p.Seen != SeenMirrorOnly || p.Outcome != "blocked" || p.Rule != "blocklist" {
		t.Errorf("refused fetch row = %+v, want mirror_only, blocked by blocklist", p)
	}
	if p := v.Packages[2]; p.Seen != SeenBlocked || p.Rule != "blocklist" || p.Reason != "because blocklist" || p.Requested != "==1" {
		t.Errorf("blocked row = %+v", p)
	}
}

func TestBypass(t *testing.T) {
	tests := []struct {
		name   string
		opts   []Option
		events func(r *rec)
		want   []string
	}{
		{"npm without a shim", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install", "x")
		}, []string{"shim_bypass[1]"}},
		{"shebang: npm then node in the same pid, one alert", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install")
			r.exec(10, 1, "/usr/bin/node", "/w", "node", "/usr/bin/npm", "install")
		}, []string{"shim_bypass[1]"}},
		{"node running npm-cli.js", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/node", "/w", "node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "i")
		}, []string{"shim_bypass[1]"}},
		{"children of a bypassing manager do not alert again", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "install")
			r.spawn(11, 10, "/bin/sh", "/w/node_modules/a", "sh", "-c", "npm install b")
			r.spawn(12, 11, "/usr/bin/npm", "/w/node_modules/a", "npm", "install", "b")
		}, []string{"shim_bypass[1]"}},
		{"two bypassing trees, two alerts", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "install")
			r.exit(10)
			r.spawn(20, 1, "/root/.cargo/bin/cargo", "/w", "cargo", "build")
		}, []string{"shim_bypass[1]", "shim_bypass[4]"}},
		{"through the shim", nil, func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "install")
			r.spawn(11, 10, "/usr/bin/npm", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install")
			r.exec(11, 10, "/usr/bin/node", "/w", "node", "/usr/bin/npm", "install")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/a", "sh", "-c", "npm run build")
			r.spawn(13, 12, "/usr/bin/npm", "/w/node_modules/a", "npm", "run", "build")
		}, nil},
		{"shim that execs the manager in its own pid", nil, func(r *rec) {
			r.spawn(10, 1, testShimDir+"/pip", "/w", "pip", "install", "x")
			r.exec(10, 1, "/usr/bin/pip", "/w", "/usr/bin/python3", "/usr/bin/pip", "install", "x")
		}, nil},
		{"a shim's exec covers its own pid, never what the manager then starts", nil, func(r *rec) {
			// npm run x through the shim: no install intent, so the shim
			// replaces itself with npm; x's own npm install is a bypass.
			r.spawn(10, 1, shimNpm, "/w", "npm", "run", "x")
			r.exec(10, 1, "/usr/bin/npm", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "run", "x")
			r.exec(10, 1, "/usr/bin/node", "/w", "node", "/usr/bin/npm", "run", "x")
			r.spawn(11, 10, "/bin/sh", "/w", "sh", "-c", "/usr/bin/npm install git+https://example.invalid/e.git")
			r.spawn(12, 11, "/usr/bin/npm", "/w", "/usr/bin/env", "node", "/usr/bin/npm", "install", "git+https://example.invalid/e.git")
		}, []string{"shim_bypass[7]"}},
		{"a fork without its exec still inherits the shim", nil, func(r *rec) {
			r.spawn(10, 1, shimNpm, "/w", "npm", "install")
			r.fork(11, 10)
			r.exec(11, 0, "/usr/bin/npm", "/w", "npm", "install")
		}, nil},
		{"the host's apt: root, its parent outside the session", nil, func(r *rec) {
			r.add(event.KindFork, event.SourceKernel, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 10, PPid: 1, UID: event.U32(0)}
			})
			r.add(event.KindExec, event.SourceKernel, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 10, PPid: 1, Exe: "/usr/bin/apt-get", Cwd: "/", Argv: []string{"apt-get", "install", "-y", "sl"}, UID: event.U32(0)}
			})
			r.spawn(11, 10, "/usr/bin/dpkg", "/", "dpkg", "--unpack", "sl.deb")
		}, nil},
		{"the session's first process, forked as root, exec'd as the agent", nil, func(r *rec) {
			r.add(event.KindFork, event.SourceKernel, func(e *event.Event) {
				e.Proc = &event.Proc{Pid: 10, PPid: 1, UID: event.U32(0)}
			})
			r.exec(10, 1, "/bin/sh", "/w", "sh", "-c", "python3 -m pip install x")
			r.spawn(11, 10, "/usr/bin/python3", "/w", "python3", "-m", "pip", "install", "x")
		}, []string{"shim_bypass[3]"}},
		{"the agent's apt-get without a shim still alerts", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/apt-get", "/w", "apt-get", "download", "sl")
		}, []string{"shim_bypass[1]"}},
		{"dot-dot out of the shim directory", nil, func(r *rec) {
			r.spawn(10, 1, testShimDir+"/../../../../usr/bin/npm", "/w", "npm", "install")
		}, []string{"shim_bypass[1]"}},
		{"a relative exe is resolved against cwd", nil, func(r *rec) {
			r.spawn(10, 1, "npm", testShimDir, "npm", "install")
			r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "install")
			r.spawn(20, 1, "./npm", "/usr/bin", "npm", "install")
		}, []string{"shim_bypass[5]"}},
		{"argv[0] naming the shim does not make one", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/npm", "/w", shimNpm, "install")
		}, []string{"shim_bypass[1]"}},
		{"python -m pip, -Im pip, -mpip", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/python3", "/w", "python3", "-m", "pip", "install", "x")
			r.exit(10)
			r.spawn(20, 1, "/usr/bin/python3.11", "/w", "python3.11", "-Im", "pip", "install", "x")
			r.exit(20)
			r.spawn(30, 1, "/usr/local/bin/python", "/w", "python", "-X", "utf8", "-mpip", "install", "x")
		}, []string{"shim_bypass[1]", "shim_bypass[4]", "shim_bypass[7]"}},
		{"pip scripts, pip3, by absolute path", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/pip3", "/w", "/usr/bin/python3", "/usr/bin/pip3", "install", "x")
			r.exit(10)
			r.spawn(20, 1, "/usr/bin/python3", "/w", "python3", "/home/a/.local/bin/pip", "install", "x")
		}, []string{"shim_bypass[1]", "shim_bypass[4]"}},
		{"python that does not run pip", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/python3", "/w", "python3", "-c", "import pip", "-m", "pip")
			r.spawn(11, 1, "/usr/bin/python3", "/w", "python3", "app.py", "-m", "pip")
			r.spawn(12, 1, "/usr/bin/python3", "/w", "python3", "-m", "pipx")
		}, nil},
		{"apt-get and dpkg", nil, func(r *rec) {
			r.spawn(10, 1, "/usr/bin/apt-get", "/", "apt-get", "install", "-y", "curl")
			r.spawn(11, 10, "/usr/bin/dpkg", "/", "dpkg", "--unpack", "curl.deb")
			r.exit(10)
			r.spawn(20, 1, "/usr/bin/dpkg", "/", "dpkg", "-i", "x.deb")
		}, []string{"shim_bypass[1]", "shim_bypass[6]"}},
		{"another shim directory", []Option{WithShimDir("/opt/shims")}, func(r *rec) {
			r.spawn(10, 1, "/opt/shims/cargo", "/w", "cargo", "build")
			r.spawn(11, 10, "/root/.cargo/bin/cargo", "/w", "cargo", "build")
			r.spawn(20, 1, shimNpm, "/w", "npm", "i")
			r.spawn(21, 20, "/usr/bin/npm", "/w", "npm", "i")
		}, []string{"shim_bypass[5]"}},
		{"a shim binary named by WithShimExe", []Option{WithShimExe("/usr/local/bin/sandtrail-shim")}, func(r *rec) {
			r.spawn(10, 1, "/usr/local/bin/sandtrail-shim", "/w", "npm", "i")
			r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "i")
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			v := build(r.evs, tt.opts...)
			if got := alertSum(v.Alerts); !slices.Equal(got, tt.want) {
				t.Errorf("Build alerts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBypassAlert(t *testing.T) {
	r := newRec("S")
	r.spawn(10, 1, "/usr/bin/npm", "/w", "npm", "install", "left pad")
	v := build(r.evs)
	if len(v.Alerts) != 1 {
		t.Fatalf("Build alerts = %v, want one", alertSum(v.Alerts))
	}
	a := v.Alerts[0]
	if err := a.Validate(); err != nil {
		t.Errorf("alert does not validate: %v", err)
	}
	if a.Kind != event.KindAlert || a.Source != event.SourceRules || a.SessionID != "S" || a.Alert.Level != "high" ||
		!a.TS.Equal(r.evs[1].TS) {
		t.Errorf("alert = %+v", a)
	}
	for _, want := range []string{"npm ran", "pid 10", "/usr/bin/npm", "npm install 'left pad'"} {
		if !strings.Contains(a.Alert.Summary, want) {
			t.Errorf("alert summary %q lacks %q", a.Alert.Summary, want)
		}
	}
}

func TestMismatchAlert(t *testing.T) {
	r := newRec("S")
	r.fetch("npm", "lodash", "4.17.21", sriA, "served")
	r.install("npm", "lodash", "4.17.99", sriA, 11)
	v := build(r.evs)
	if len(v.Alerts) != 1 {
		t.Fatalf("Build alerts = %v, want one", alertSum(v.Alerts))
	}
	a := v.Alerts[0]
	if err := a.Validate(); err != nil {
		t.Errorf("alert does not validate: %v", err)
	}
	want := "the shim says npm lodash@4.17.99 was installed; the mirror never served that version in this session, and served 4.17.21"
	if a.Alert.Summary != want {
		t.Errorf("alert summary = %q, want %q", a.Alert.Summary, want)
	}
}
