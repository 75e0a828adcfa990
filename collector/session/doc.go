// Package session runs sandbox sessions: it gives each session its own
// cgroups, starts the session's main process inside them, pauses, resumes,
// terminates and cleans up the session, and watches its resource limits.
// Every lifecycle step becomes a session.<op> event and every limit hit a
// limit.hit event, built in one function (Session.toEvent).
//
// # Cgroups
//
// Each session gets a v2 cgroup, sandtrail-<id>, beneath the v2 cgroup the
// manager runs in. It is the session's identity: its inode number is the
// cgroup id that bpf_get_current_cgroup_id returns for every process of the
// session, and Manager.Lookup maps it back to the session id. On a hybrid
// host (v1 controllers, v2 without controllers) the limits live in v1
// controller cgroups of the same name beneath the manager's own memory,
// pids, cpu (and freezer) cgroups. On a pure v2 host they live in the v2
// cgroup, with the controllers enabled in the parent's
// cgroup.subtree_control. Session cgroups never take a process out of its
// ancestors. Cleanup removes them.
//
// # Race-free start
//
// Start clones the main process straight into the v2 cgroup
// (CLONE_INTO_CGROUP via SysProcAttr.CgroupFD). For the v1 hierarchies it
// forks from a locked OS thread that first joined the session's v1 cgroups
// through their per-thread "tasks" files: a child inherits the cgroups of
// the thread that forks it, so it is inside every limit from its first
// instruction. The thread is then discarded. Start verifies the child's
// membership in /proc/<pid>/cgroup and kills it if it is wrong.
//
// # Limits
//
// A monitor goroutine per session polls the cgroup counters (every 250 ms
// by default) and reports: memory_oom from v2 memory.events or v1
// memory.oom_control oom_kill, naming the victim from Manager.OOMVictim
// (the eBPF collector's oom:mark_victim hook), the kernel log's oom-kill
// line, or the main process's wait status; pids from pids.events, at most
// once a second; cpu_throttle from the throttled time in cpu.stat, at most
// once every 5 s; disk_quota when the session's filesystem is full (the
// kernel has refused the write with ENOSPC; the session goes on); and
// timeout from a timer, which kills it (reason timeout).
//
// # Disk
//
// Each session has its own filesystem, a tmpfs of Limits.DiskBytes mounted
// at <root>/<id>/fs, whose work directory is the workdir. The main process
// is forked into a mount namespace of the session's own (set up on the
// same locked thread, before the fork), where /tmp, /var/tmp, /dev/shm and
// /run/lock are overlays whose upper layers are in that filesystem, and
// the sessions root is hidden except for the session's own workdir. So
// everything the session can write counts against one quota that the
// kernel enforces, and nothing of it is on the host's disk. Cleanup copies
// a preserved workdir out to disk.
//
// # A lost host
//
// Create writes a state file, <root>/<id>/session.json, before it makes
// the session's filesystem and cgroups, and the manager holds a flock on
// it until Cleanup removes it. When the manager's process dies the kernel
// drops the lock, and Manager.Abandoned in a later manager finds the
// session, adopts it and lets it be ended with ReasonHostLost (which kills
// what is still running in its cgroups) and cleaned up.
//
// # Trust model
//
// The manager runs as root. Processes in a session are untrusted: they
// cannot leave its cgroups, so attribution by cgroup id is the kernel's.
// Their output that reaches events (the comm in an OOM report, workdir
// contents in a snapshot) is parsed defensively. Events are handed to an
// emit function that must never block.
package session
