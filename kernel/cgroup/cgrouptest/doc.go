// Package cgrouptest makes scratch cgroup v2 cgroups for tests and
// benchmarks that run processes inside a cgroup of their own: New makes one
// beneath the cgroup the test process runs in (never elsewhere), and the
// test's cleanup removes it, waiting for exited processes to leave it.
//
// New skips the test, saying why, when it does not run as root, when no
// cgroup v2 hierarchy is mounted, or when the test process is in none. It
// is Linux-only; on other systems the package is empty.
package cgrouptest
