// Package attributiontest makes the peers that attribution must refuse, for
// the tests of every server that attributes its peers (kernel/attribution,
// the ingest server, the apt broker): a connection whose connecting process
// has exited (Handoff), and a process that takes over its pid (ReusePid).
//
// Handoff re-runs the test binary as a helper process; the test binary's
// TestMain calls Main first, which runs the helper's part and exits when it
// was started as one.
package attributiontest
