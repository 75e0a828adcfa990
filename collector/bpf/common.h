/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structs and constants shared between the BPF programs and the Go loader.
 * They are defined here once and exported to Go by bpf2go -type; the Go side
 * never redeclares them.
 */
#ifndef SANDTRAIL_COMMON_H
#define SANDTRAIL_COMMON_H

/* Sizes, exported to Go. ARGV_MAX is the most argv bytes kept per exec. */
enum limits {
	ARGV_MAX = 32768,
	ARGV_CHUNK = 4096,
	ARGV_CHUNKS = ARGV_MAX / ARGV_CHUNK,
	/* The last bytes of an argv longer than ARGV_MAX, kept besides its
	 * first ARGV_MAX bytes. */
	ARGV_TAIL = 4096,
	/* The most environment bytes kept per exec, when the loader asks for
	 * the environment (CONFIG_EXEC_ENV); the Go side keeps only the
	 * variables the policy names. */
	ENV_MAX = 16384,
	ENV_CHUNKS = ENV_MAX / ARGV_CHUNK,
	FILENAME_MAX_LEN = 4096,
	CWD_MAX = 4096,
	CWD_MAX_DEPTH = 64,
	NAME_MAX_LEN = 256,
	COMM_LEN = 16,
	/* How many ancestor levels above a task's own cgroup are checked
	 * against the watched table, so that cgroups nested inside a session
	 * still count. */
	CGROUP_MAX_NEST = 8,
};

/* Offsets inside exec_event.data: the filename starts at 0; the cwd follows
 * it; the executed file's path follows the cwd; argv follows that, then the
 * argv tail, then the environment. The data array is sized so that every
 * masked offset plus the largest single read stays inside it. */
#define EXEC_DATA_MASK_CWD 0x1fff  /* offsets below 8 KiB */
#define EXEC_DATA_MASK_ARGV 0x3fff /* offsets below 16 KiB */
#define EXEC_DATA_SIZE (16384 + ARGV_MAX + ARGV_TAIL + ENV_MAX)

/* Event kinds: the first field of every record in the ring buffer and the
 * index of the per-kind drop counters. */
enum event_kind {
	KIND_EXEC = 1,
	KIND_FORK = 2,
	KIND_EXIT = 3,
	KIND_EXEC_FAILED = 4,
	KIND_OOM_VICTIM = 5,
	/* file.c: every file.* op is one record kind (the op is in the record). */
	KIND_FILE = 6,
	/* net.c: net.connect and net.send (with the egress verdict), net.close,
	 * net.listen and net.accept. */
	KIND_NET_CONNECT = 7,
	KIND_NET_CLOSE = 8,
	KIND_NET_LISTEN = 9,
	KIND_NET_ACCEPT = 10,
	/* net.c: net.connect and net.send of unix sockets (struct unix_event),
	 * and net.socket (struct socket_event). */
	KIND_NET_UNIX = 11,
	KIND_NET_SOCKET = 12,
	/* deny.c: process.denied, a syscall refused by the session filter. */
	KIND_DENIED = 13,
	KIND_MAX = 14,
};

/* exec_event flags. */
enum exec_flags {
	EXEC_ARGV_TRUNCATED = 1,
	EXEC_CWD_TRUNCATED = 2,
	EXEC_FILENAME_TRUNCATED = 4,
	EXEC_ARGV_FAULT = 8,
	/* The executed file's path walk was cut short. */
	EXEC_EXE_TRUNCATED = 16,
	/* The executed file's dentry is unlinked, or a pseudo file's (a
	 * memfd): the kernel names it with " (deleted)". */
	EXEC_EXE_DELETED = 32,
	/* The environment was longer than ENV_MAX, or could not be read. */
	EXEC_ENV_TRUNCATED = 64,
	/* The executed file is on an overlay whose layout the kernel's BTF
	 * does not describe: exe_dev and exe_ino are the overlay's, and Go
	 * names the real file from /proc/PID/exe. */
	EXEC_EXE_OVERLAY = 128,
};

/* config map keys (an array of u32). */
enum config_key {
	CONFIG_HOST_WIDE = 0,
	/* Wake the reader only once this many bytes wait in the ring buffer
	 * (the reader also polls on a timer); 0 wakes it for every record. */
	CONFIG_WAKEUP_BYTES = 1,
	/* Non-zero: copy each exec's environment (the Go side keeps the
	 * variables the policy names). */
	CONFIG_EXEC_ENV = 2,
	CONFIG_MAX = 3,
};

/* The bits of a watched map value (shared.h). */
enum watch_flags {
	WATCH_ON = 1,
	/* The session refuses user namespaces: a child that clone3 made in a
	 * new one (clone3's flags are behind a pointer the seccomp filter
	 * cannot read) is killed before it runs (process.c, deny_userns). */
	WATCH_DENY_USERNS = 2,
};

/* The common header of every record. */
/* A key of cgroup_drops (shared.h): a watched cgroup and a record kind. */
struct drop_key {
	__u64 cgroup;
	__u32 kind;
	__u32 _pad;
};

struct event_header {
	__u32 kind;
	__u32 pid;       /* thread-group id */
	__u64 ts;        /* bpf_ktime_get_boot_ns() when recorded */
	__u64 cgroup_id; /* the task's own v2 cgroup id */
	__u64 watched;   /* the watched cgroup id it matched; 0 in host-wide mode */
	char comm[COMM_LEN];
};

/* process.exec. data holds the filename (filename_len bytes, no NUL), then
 * the cwd components from the leaf up to the root (cwd_len bytes, each
 * component NUL-terminated), then the components of the path of the file
 * the kernel executed (bprm->file), the same way (exe_len bytes), then argv
 * exactly as the kernel laid it out at mm->arg_start (argv_len bytes, each
 * argument NUL-terminated unless cut), then, when argv is longer than
 * ARGV_MAX, its last bytes (tail_len), then the environment as laid out at
 * mm->env_start (env_len bytes). Only the used part of data is sent. */
struct exec_event {
	struct event_header hdr;
	__u32 ppid;
	__u32 uid;
	__u32 euid;
	__u32 auid;
	__u64 start_time; /* task->start_boottime, ns since boot */
	__u64 stdin_pipe; /* pipefs inode number of fd 0, 0 when not a pipe */
	__u64 stdout_pipe;
	__u32 filename_len;
	__u32 cwd_len;
	__u32 argv_len;
	__u32 flags;
	/* The executed file: its inode, the kernel's dev_t of its super block,
	 * its link count and change time (the hash cache's key). */
	__u64 exe_ino;
	__s64 exe_ctime_sec;
	__u32 exe_ctime_nsec;
	__u32 exe_dev;
	__u32 exe_nlink;
	__u32 exe_len;
	/* The whole argument and environment areas and their counts. */
	__u32 argv_size;
	__u32 argc;
	__u32 env_size;
	__u32 envc;
	__u32 tail_len;
	__u32 env_len;
	char data[EXEC_DATA_SIZE];
};

/* process.fork: a new process (not a thread). hdr.pid is the parent. */
struct fork_event {
	struct event_header hdr;
	__u32 child_pid;
	__u32 uid;
	__u64 child_start_time;
};

/* process.exit of a thread-group leader. */
struct exit_event {
	struct event_header hdr;
	__u32 ppid;
	__u32 exit_code; /* task->exit_code: (status << 8) | signal */
	__u64 start_time;
};

/* process.exec_failed: execve or execveat returned an error. */
struct exec_failed_event {
	struct event_header hdr;
	__u32 uid;
	__s32 ret; /* the negative errno */
	__u32 filename_len;
	__u32 flags;
	char filename[FILENAME_MAX_LEN];
};

/* An OOM victim chosen by the kernel (oom:mark_victim). */
struct oom_event {
	struct event_header hdr;
	__u32 uid;
	__u32 _pad;
};

#endif
