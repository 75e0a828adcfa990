package mirror

import (
	"net/http"
	"testing"
	"time"

	"github.com/sandtrail/sandtrail/kernel/cgroup/cgrouptest"
	"github.com/sandtrail/sandtrail/registry-mirror/npm/npmtest"
)

// TestAttribution: a client whose socket is in a session's cgroup is
// attributed to the session, found by the kernel (sock_diag).
func TestAttribution(t *testing.T) {
	id := cgrouptest.OwnID(t)
	reg := npmtest.Start(t, npmtest.Package{Name: "left-pad", Versions: []npmtest.Version{{Version: "1.3.0", Published: time.Now().Add(-72 * time.Hour)}}})
	srv, rec := start(t, reg, sessionsOf{id: "sess-attr"})
	resp, err := http.Get(srv.URL + "/npm/left-pad/-/left-pad-1.3.0.tgz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	evs := rec.all()
	if len(evs) != 1 || evs[0].SessionID != "sess-attr" {
		t.Errorf("events = %v, want one in session sess-attr", evs)
	}
}
