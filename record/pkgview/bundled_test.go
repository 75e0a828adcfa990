package pkgview

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// installAt is a shim's npm claim of name@version at an install path,
// bundled in the package of the purl carrier when that is not empty.
func (r *rec) installAt(name, version, hash, path, carrier string, managerPid int32) *event.Event {
	e := r.install("npm", name, version, hash, managerPid)
	e.Pkg.Path, e.Pkg.BundledIn = path, carrier
	if carrier != "" {
		e.Pkg.SourceURL, e.Pkg.Requested, e.Pkg.Direct = "", "", event.Bool(false)
	}
	return e
}

// bundledSum is what a bundled-copy test checks of a row.
type bundledSum struct {
	row    string // name@version seen bundled_in
	paths  string
	procs  string // pid:match, comma-joined
	alerts string
}

func sumBundled(v *View) []bundledSum {
	var out []bundledSum
	for _, p := range v.Packages {
		var procs []string
		for _, pr := range p.Processes {
			procs = append(procs, fmt.Sprintf("%d:%s", pr.Pid, pr.Match))
		}
		row := fmt.Sprintf("%s@%s %s", p.Name, p.Version, p.Seen)
		if p.BundledIn != "" {
			row += " in " + p.BundledIn
		}
		if p.Verified != nil && *p.Verified {
			row += " verified"
		}
		out = append(out, bundledSum{row, strings.Join(p.Paths, ","), strings.Join(procs, ","), strings.Join(p.Alerts, ",")})
	}
	return out
}

// TestBundled: a bundled copy is its own row, joined with no fetch of its
// name and version; it is verified through its carrier's verified fetch,
// and raises unverified_install when there is none or the copy is not in
// the carrier's folder; an npm script is charged to the row installed at
// its directory, a nested copy's included.
func TestBundled(t *testing.T) {
	const carrier = "pkg:npm/carrier@1.0.0"
	npmRun := func(r *rec) {
		r.spawn(10, 1, shimNpm, "/w", "npm", "install", "carrier", "inner@1.0.0")
		r.spawn(11, 10, "/usr/bin/npm", "/w", "npm", "install", "carrier", "inner@1.0.0")
	}
	tests := []struct {
		name   string
		events func(r *rec)
		want   []bundledSum
		alerts []string
	}{
		{"the bundled copy's script is its own, beside the registry's copy", func(r *rec) {
			npmRun(r)
			bundling(r.fetch("npm", "carrier", "1.0.0", sriA, "served"), "inner")
			r.fetch("npm", "inner", "1.0.0", sriB, "served")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/carrier/node_modules/inner", "sh", "-c", "node x.js")
			r.spawn(13, 12, "/usr/bin/node", "/w/node_modules/carrier/node_modules/inner", "node", "x.js")
			r.exit(11)
			r.installAt("carrier", "1.0.0", sriA, "node_modules/carrier", "", 11)
			r.installAt("inner", "1.0.0", "", "node_modules/carrier/node_modules/inner", carrier, 11)
			r.installAt("inner", "1.0.0", sriB, "node_modules/inner", "", 11)
		}, []bundledSum{
			{row: "carrier@1.0.0 shim+mirror verified", paths: "node_modules/carrier"},
			{row: "inner@1.0.0 shim+mirror verified", paths: "node_modules/inner"},
			{row: "inner@1.0.0 bundled in " + carrier + " verified", paths: "node_modules/carrier/node_modules/inner",
				procs: "12:npm_lifecycle,13:inherited"},
		}, nil},
		{"a registry fetch of the name and version does not verify a copy whose carrier was not", func(r *rec) {
			npmRun(r)
			r.fetch("npm", "inner", "1.0.0", sriB, "served")
			r.installAt("carrier", "1.0.0", sriA, "node_modules/carrier", "", 11)
			r.installAt("inner", "1.0.0", "", "node_modules/carrier/node_modules/inner", carrier, 11)
		}, []bundledSum{
			{row: "inner@1.0.0 mirror_only verified"},
			{row: "carrier@1.0.0 shim_only", paths: "node_modules/carrier", alerts: RuleUnverified},
			{row: "inner@1.0.0 bundled in " + carrier, paths: "node_modules/carrier/node_modules/inner", alerts: RuleUnverified},
		}, []string{"unverified_install[5]", "unverified_install[6]"}},
		{"a copy its carrier's verified fetch does not list as bundled is not verified by it", func(r *rec) {
			// The mirror served lodash verified; the same npm unpacked evil
			// (resolved file:evil.tgz) in its folder, and the agent's
			// lockfile marks it inBundle: only the mirror's record of what
			// the tarball bundles counts.
			npmRun(r)
			r.fetch("npm", "lodash", "4.17.21", sriA, "served")
			bundling(r.fetch("npm", "carrier", "1.0.0", sriB, "served"), "other")
			r.installAt("lodash", "4.17.21", sriA, "node_modules/lodash", "", 11)
			r.installAt("evil", "6.6.6", "", "node_modules/lodash/node_modules/evil", "pkg:npm/lodash@4.17.21", 11)
			r.installAt("carrier", "1.0.0", sriB, "node_modules/carrier", "", 11)
			r.installAt("inner", "1.0.0", "", "node_modules/carrier/node_modules/inner", carrier, 11)
		}, []bundledSum{
			{row: "lodash@4.17.21 shim+mirror verified", paths: "node_modules/lodash"},
			{row: "carrier@1.0.0 shim+mirror verified", paths: "node_modules/carrier"},
			{row: "evil@6.6.6 bundled in pkg:npm/lodash@4.17.21", paths: "node_modules/lodash/node_modules/evil", alerts: RuleUnverified},
			{row: "inner@1.0.0 bundled in " + carrier, paths: "node_modules/carrier/node_modules/inner", alerts: RuleUnverified},
		}, []string{"unverified_install[7]", "unverified_install[9]"}},
		{"a copy outside its carrier's folder is not verified by it", func(r *rec) {
			npmRun(r)
			bundling(r.fetch("npm", "carrier", "1.0.0", sriA, "served"), "inner")
			r.installAt("carrier", "1.0.0", sriA, "node_modules/carrier", "", 11)
			r.installAt("inner", "1.0.0", "", "node_modules/other/node_modules/inner", carrier, 11)
			r.installAt("x", "1.0.0", "", "node_modules/x", "not a purl", 11)
		}, []bundledSum{
			{row: "carrier@1.0.0 shim+mirror verified", paths: "node_modules/carrier"},
			{row: "inner@1.0.0 bundled in " + carrier, paths: "node_modules/other/node_modules/inner", alerts: RuleUnverified},
			{row: "x@1.0.0 bundled in not a purl", paths: "node_modules/x", alerts: RuleUnverified},
		}, []string{"unverified_install[6]", "unverified_install[7]"}},
		{"no mismatch for a bundled copy of a version the mirror did not serve", func(r *rec) {
			npmRun(r)
			bundling(r.fetch("npm", "carrier", "1.0.0", sriA, "served"), "inner")
			r.fetch("npm", "inner", "2.0.0", sriB, "served")
			r.installAt("carrier", "1.0.0", sriA, "node_modules/carrier", "", 11)
			r.installAt("inner", "1.0.0", "", "node_modules/carrier/node_modules/inner", carrier, 11)
			r.installAt("inner", "2.0.0", sriB, "node_modules/inner", "", 11)
		}, []bundledSum{
			{row: "carrier@1.0.0 shim+mirror verified", paths: "node_modules/carrier"},
			{row: "inner@2.0.0 shim+mirror verified", paths: "node_modules/inner"},
			{row: "inner@1.0.0 bundled in " + carrier + " verified", paths: "node_modules/carrier/node_modules/inner"},
		}, nil},
		{"a nested copy's script goes to the version installed there, not the latest", func(r *rec) {
			npmRun(r)
			r.fetch("npm", "b", "1.0.0", sriA, "served")
			r.fetch("npm", "b", "2.0.0", sriB, "served")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/a/node_modules/b", "sh", "-c", "x")
			r.spawn(14, 11, "/bin/sh", "/w/node_modules/b", "sh", "-c", "x")
			r.installAt("b", "1.0.0", sriA, "node_modules/a/node_modules/b", "", 11)
			r.installAt("b", "1.0.0", sriA, "node_modules/c/node_modules/b", "", 11)
			r.installAt("b", "2.0.0", sriB, "node_modules/b", "", 11)
		}, []bundledSum{
			{row: "b@1.0.0 shim+mirror verified", paths: "node_modules/a/node_modules/b,node_modules/c/node_modules/b", procs: "12:npm_lifecycle"},
			{row: "b@2.0.0 shim+mirror verified", paths: "node_modules/b", procs: "14:npm_lifecycle"},
		}, nil},
		{"a script at a path no claim names is not the bundled copy's", func(r *rec) {
			npmRun(r)
			bundling(r.fetch("npm", "carrier", "1.0.0", sriA, "served"), "inner")
			r.fetch("npm", "inner", "1.0.0", sriB, "served")
			r.spawn(12, 11, "/bin/sh", "/w/node_modules/inner", "sh", "-c", "x")
			r.installAt("carrier", "1.0.0", sriA, "node_modules/carrier", "", 11)
			r.installAt("inner", "1.0.0", "", "node_modules/carrier/node_modules/inner", carrier, 11)
		}, []bundledSum{
			{row: "carrier@1.0.0 shim+mirror verified", paths: "node_modules/carrier"},
			{row: "inner@1.0.0 mirror_only verified", procs: "12:npm_lifecycle"},
			{row: "inner@1.0.0 bundled in " + carrier + " verified", paths: "node_modules/carrier/node_modules/inner"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRec("S")
			tt.events(r)
			v := build(r.evs)
			if got := sumBundled(v); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Build rows =\n%+v\nwant\n%+v", got, tt.want)
			}
			if got := alertSum(v.Alerts); !reflect.DeepEqual(got, tt.alerts) {
				t.Errorf("Build alerts = %v, want %v", got, tt.alerts)
			}
			w := newWatcher()
			var live []*event.Event
			for _, e := range r.evs {
				live = append(live, w.Add(e)...)
			}
			if got := alertSum(live); !reflect.DeepEqual(got, tt.alerts) {
				t.Errorf("Watcher alerts = %v, want %v (Build's)", got, tt.alerts)
			}
		})
	}
}

func TestScriptDir(t *testing.T) {
	tests := []struct {
		c    claim
		cwd  string
		want string
	}{
		{claim{"npm", "b", MatchNpm}, "/w/node_modules/a/node_modules/b", "/w/node_modules/a/node_modules/b"},
		{claim{"npm", "b", MatchNpm}, "/w/node_modules/b/lib", "/w/node_modules/b"},
		{claim{"npm", "@s/n", MatchNpm}, "/w/node_modules/@s/n/x", "/w/node_modules/@s/n"},
		{claim{"npm", "b", MatchNpm}, "/w/node_modules/bc", ""},
		{claim{"npm", "b", MatchNpm}, "/w/b", ""},
		{claim{"cargo", "b", MatchCargo}, "/w/node_modules/b", ""},
	}
	for _, tt := range tests {
		if got := scriptDir(tt.c, tt.cwd); got != tt.want {
			t.Errorf("scriptDir(%v, %q) = %q, want %q", tt.c, tt.cwd, got, tt.want)
		}
	}
}

// FuzzScriptDir: for any cwd npm's claim reads, the install directory is
// the cwd or a parent of it, ending in node_modules/<the claimed name>.
func FuzzScriptDir(f *testing.F) {
	for _, s := range []string{"/w/node_modules/a/node_modules/@s/n/lib", "/node_modules/", "/a/node_modules/.bin", "node_modules/x", "/x/node_modules/@s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cwd string) {
		c, ok := claimOf(mgrNpm, "/bin/sh", []string{"sh"}, cwd)
		if !ok || c.match != MatchNpm {
			return
		}
		d := scriptDir(c, cwd)
		if d == "" {
			t.Fatalf("scriptDir(%v, %q) = \"\", want the claim's directory", c, cwd)
		}
		if !strings.HasPrefix(cwd, d) || (len(cwd) > len(d) && cwd[len(d)] != '/') || !strings.HasSuffix(d, "/node_modules/"+c.name) {
			t.Errorf("scriptDir(%v, %q) = %q, want a parent of the cwd ending in node_modules/%s", c, cwd, d, c.name)
		}
	})
}
