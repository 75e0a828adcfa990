package event_test

import (
	"fmt"
	"time"

	"github.com/sandtrail/sandtrail/record/event"
)

// A producer converts its own data to an Event in exactly one function,
// redacting argv, URLs and summaries on the way, and validates the result
// before handing it on. Seq stays zero: the journal assigns it.
func Example() {
	// What a package manager shim knows after npm has run.
	type npmResult struct {
		argv      []string
		spec      string
		version   string
		registry  string
		integrity string
	}
	toEvent := func(r npmResult, pid int32, sessionID string, now time.Time) (*event.Event, error) {
		e := &event.Event{
			V:         event.SchemaVersion,
			TS:        now,
			SessionID: sessionID,
			Kind:      "pkg.install",
			Source:    event.SourceShim, // the agent side's account: joined, never believed alone
			Proc:      &event.Proc{Pid: pid, Comm: "npm", Argv: event.RedactArgv(r.argv)},
			Pkg: &event.Pkg{
				Manager:   "npm",
				Ecosystem: "npm",
				Name:      "lodash",
				Requested: r.spec,
				Resolved:  r.version,
				Registry:  event.RedactURL(r.registry),
				Hash:      r.integrity,
				Direct:    event.Bool(true),
				Purl:      "pkg:npm/lodash@" + r.version,
			},
		}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("building pkg.install event: %w", err)
		}
		return e, nil
	}

	e, err := toEvent(npmResult{
		argv:      []string{"npm", "install", "lodash@^4.17.0", "--//npm.acme.example/:_authToken=s3cret"},
		spec:      "^4.17.0",
		version:   "4.17.21",
		registry:  "https://ci:hunter2@npm.acme.example/",
		integrity: "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==",
	}, 4242, "s-1", time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := event.Marshal(e)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"v":1,"seq":0,"ts":"2026-03-14T09:26:53.589793238Z","session_id":"s-1","kind":"pkg.install","source":"shim","proc":{"pid":4242,"comm":"npm","argv":["npm","install","lodash@^4.17.0","--//npm.acme.example/:_authToken=***"]},"pkg":{"manager":"npm","ecosystem":"npm","name":"lodash","requested":"^4.17.0","resolved":"4.17.21","registry":"https://ci:***@npm.acme.example/","hash":"sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg==","direct":true,"purl":"pkg:npm/lodash@4.17.21"}}
}

// Unmarshal is the one way untrusted bytes become an Event.
func ExampleUnmarshal() {
	_, err := event.Unmarshal([]byte(`{"v":1,"ts":"2026-03-14T09:26:53Z","session_id":"s-1","kind":"pkg.install","source":"agent","pkg":{"ecosystem":"npm","name":"x"}}`))
	fmt.Println(err)
	// Output:
	// event: invalid: source: unknown "agent"
}

func ExampleRedactArgv() {
	fmt.Println(event.RedactArgv([]string{"mysql", "-u", "root", "-phunter2", "app"}))
	fmt.Println(event.RedactArgv([]string{"curl", "-H", "Authorization: Bearer abc123", "https://bob:pw@example.com/?token=x"}))
	// Output:
	// [mysql -u root -p*** app]
	// [curl -H Authorization: Bearer *** https://bob:***@example.com/?token=***]
}
