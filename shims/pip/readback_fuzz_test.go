package pip

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/shims"
)

// FuzzReportClaims: a pip installation report (pip's --report, what the
// install did) that parses is claimed one package per install item, in
// order, with the item's name, version and URL; a hash is "alg:hex" in
// lower case or none; only a requested item is direct or has a spec, and a
// transitive one's requested_by is the name of another item of the report.
func FuzzReportClaims(f *testing.F) {
	f.Add([]byte(`{"version":"1","install":[{"metadata":{"name":"Requests","version":"2.32.3","requires_dist":["urllib3<3,>=1.21.1","idna (>=2.5)"]},"download_info":{"url":"http://127.0.0.1:8484/pypi/files/r.whl","archive_info":{"hash":"sha256=ABCD","hashes":{"sha256":"ABCD"}}},"requested":true,"is_direct":false},{"metadata":{"name":"urllib3","version":"2.2.1"},"download_info":{"url":"u","archive_info":{"hash":"SHA384=ff"}}},{"metadata":{"name":"idna"},"download_info":{"url":"file:///src/idna","archive_info":null},"is_direct":true}]}`))
	f.Add([]byte(`{"install":[{"metadata":{"name":"a","requires_dist":["b; extra == 'x'"]},"requested":true},{"metadata":{"name":"b","requires_dist":["a"]}},{"metadata":{"name":"B","requires_dist":["b"]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs := []shims.Request{{Name: "requests", Spec: ">=2"}, {Source: "file:///src/idna"}}
		got, err := ParseReport(b, reqs)
		if err != nil {
			return
		}
		var rep struct {
			Install []item `json:"install"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("ParseReport(%q) parsed what encoding/json does not: %v", b, err)
		}
		if len(got) != len(rep.Install) {
			t.Fatalf("ParseReport claims %d packages of %d install items", len(got), len(rep.Install))
		}
		for i, g := range got {
			it := rep.Install[i]
			if g.Name != it.Metadata.Name || g.Version != it.Metadata.Version || g.SourceURL != it.DownloadInfo.URL {
				t.Fatalf("ParseReport[%d] = %+v, want item %+v", i, g, it)
			}
			if g.Hash != "" && (!strings.Contains(g.Hash, ":") || g.Hash != strings.ToLower(g.Hash)) {
				t.Fatalf("ParseReport[%d].Hash = %q, want alg:hex in lower case", i, g.Hash)
			}
			if g.Direct != it.Requested || !it.Requested && g.Requested != "" || it.Requested && g.RequestedBy != "" {
				t.Fatalf("ParseReport[%d] = %+v, for an item requested=%v", i, g, it.Requested)
			}
			if g.RequestedBy == "" {
				continue
			}
			other := false
			for j, o := range rep.Install {
				other = other || j != i && o.Metadata.Name == g.RequestedBy
			}
			if !other {
				t.Fatalf("ParseReport[%d] (%s) is requested by %q, no other item of the report", i, g.Name, g.RequestedBy)
			}
		}
	})
}
