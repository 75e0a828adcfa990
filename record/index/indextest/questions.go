package indextest

import "github.com/sandtrail/sandtrail/record/query"

// Questions are filters whose answers the stores' tests check on
// generated streams (Generate), against a full scan or against each other:
// each of the five questions, their look-alikes, and their combinations
// with kinds, pids, limits and time windows.
var Questions = []query.Args{
	{Path: "/etc/ssh"}, {Path: "/etc/ssh/"}, {Path: "/etc/sshd"}, {Path: "/home/agent/.ssh/*"}, {Path: "/home/**/id_*"},
	{Path: "**/*.bak"}, {Path: "/etc/ss?"}, {Path: "/etc/[a-r]*"},
	{Domain: "example.com"}, {Domain: "*.example.com"}, {Domain: "badexample.com"}, {Domain: "*.evil.example"},
	{Package: "npm:lodash@4.17.20"}, {Package: "pkg:npm/lodash@4.17.20"}, {Package: "npm:lodash@^4.17.0"},
	{Package: "npm:lodash@>=4.17.19 <4.17.21"}, {Package: "npm:lodash"}, {Package: "deb:curl@>= 7.88.1-10"},
	{Package: "pypi:typing-extensions@4.12.2"}, {Package: "npm:@babel/core@7.24.0"}, {Package: "cargo:serde"},
	{Reason: "oom"}, {Reason: "timeout"}, {Reason: "policy_violation"},
	{Session: SessionID(7)},
	{Session: SessionID(7), Since: "2026-11-01T00:00:01Z", Until: "2026-11-01T00:00:04Z"},
	{Path: "/etc/ssh", Since: "2026-11-01T00:00:02Z"}, {Domain: "*.example.com", Session: SessionID(3)},
	{Path: "/etc", Kind: "file.write"}, {Reason: "oom", Kind: "session.terminate"}, {Kind: "net.,pkg."},
	{Kind: "alert"}, {Pid: "1234"}, {Limit: "5"}, {Path: "/etc/ssh", Limit: "3"}, {Package: "npm:lodash@^4.17.0", Limit: "2"},
	{Domain: "pypi.org", Reason: "timeout", Kind: "net.connect"},
	{Since: "2026-11-01T00:00:03Z", Until: "2026-11-01T00:00:05Z"},
}
