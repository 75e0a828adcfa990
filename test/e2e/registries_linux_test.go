package e2e

import (
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// TestRunRegistriesOnlyThroughMirror: from a session whose host serves the
// mirror, the approved registries are not reachable around it: their names
// do not resolve (the DNS proxy refuses them, and the refusal is in the
// record with its reason), so npm pointed straight at registry.npmjs.org
// fails before any byte of a package arrives; through the mirror it works.
func TestRunRegistriesOnlyThroughMirror(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := `set -e
python3 -c 'import socket; socket.getaddrinfo("registry.npmjs.org", 443)' 2>/dev/null && exit 3
mkdir -p "$HOME/p" && cd "$HOME/p" && echo '{"name":"p","version":"1.0.0"}' >package.json
if npm install --no-audit --no-fund --no-update-notifier --fetch-retries=0 --registry=https://registry.npmjs.org/ is-number@7.0.0 >direct.out 2>&1; then exit 4; fi
npm install --no-audit --no-fund --no-update-notifier is-number@7.0.0 >npm.out 2>&1 || { cat npm.out; exit 5; }
echo ok
`
	r := e.run("--user", "nobody", "--timeout", "5m", "--", "sh", "-c", script)
	if r.code != 0 {
		t.Fatalf("session: exit %d (3: the registry resolved; 4: npm installed around the mirror; 5: npm failed through the mirror)\n%s\n%s",
			r.code, r.stdout, r.stderr)
	}
	refused := 0
	for _, ev := range e.events(r.summary.SessionID) {
		if ev.Kind == event.KindNetDNS && ev.Net != nil && ev.Net.DNS != nil &&
			strings.TrimSuffix(ev.Net.DNS.Query, ".") == "registry.npmjs.org" &&
			ev.Net.Verdict == "blocked" && strings.Contains(ev.Net.Reason, "only through the mirror") {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no refused net.dns of registry.npmjs.org naming the mirror in the record")
	}
	e.verify()
}
