package query

import (
	"errors"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary flag values to Parse. It must never panic, an
// error must wrap ErrBadFilter, and a parsed path or domain pattern must be
// consistent with the index ranges it hands out.
func FuzzParse(f *testing.F) {
	f.Add("s-1", "2h", "", "file.,net.connect", "/home/**/id_*", "", "", "oom", "42", "10", "/home/a/.ssh/id_rsa")
	f.Add("", "2026-11-29T08:00:00Z", "7d", "", "", "*.example.com", "", "", "", "", "a.example.com")
	f.Add("", "", "", "pkg", "", "", "pkg:npm/%40babel/core@7.24.0", "", "", "", "")
	f.Add("", "", "", "", "/etc/[!a-c]*", "", "npm:lodash@^4.17.0", "", "", "", "/etc/d")
	f.Add("", "", "", "", "", "", "pypi:requests[socks]>=2,!=2.31.0,<3", "", "", "", "2.32.3")
	f.Fuzz(func(t *testing.T, session, since, until, kind, path, domain, pkg, reason, pid, limit, probe string) {
		a := Args{Session: session, Since: since, Until: until, Kind: kind, Path: path, Domain: domain,
			Package: pkg, Reason: reason, Pid: pid, Limit: limit}
		fl, err := Parse(a, time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
		if err != nil {
			if !errors.Is(err, ErrBadFilter) {
				t.Fatalf("Parse(%+v) error = %v, want it to wrap ErrBadFilter", a, err)
			}
			return
		}
		if fl.Path != nil && fl.Path.Match(probe) && !inRanges(fl.Path.Ranges(), probe) {
			t.Fatalf("path %q matches %q outside its ranges %+v", fl.Path.Pattern, probe, fl.Path.Ranges())
		}
		if fl.Domain != nil && fl.Domain.Match(probe) && !inRanges([]Range{fl.Domain.Range()}, ReverseDomain(NormalizeDomain(probe))) {
			t.Fatalf("domain %+v matches %q outside its range", fl.Domain, probe)
		}
		if fl.Package != nil {
			fl.Package.MatchVersion(probe)
		}
	})
}
