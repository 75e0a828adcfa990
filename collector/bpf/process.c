//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The process programs of the sandtrail collector: exec, fork, exit, failed
 * exec and OOM victims of the processes in watched session cgroups.
 *
 * Every record goes to one ring buffer. When the ring buffer is full the
 * record is not lost silently: the per-kind drop counter is incremented, and
 * the Go side turns the counts into collector.loss events.
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "common.h"

#define PIPEFS_MAGIC 0x50495045

char LICENSE[] SEC("license") = "GPL";

/* Export the shared types to bpf2go. */
const struct exec_event *unused_exec_event __attribute__((unused));
const struct fork_event *unused_fork_event __attribute__((unused));
const struct exit_event *unused_exit_event __attribute__((unused));
const struct exec_failed_event *unused_exec_failed_event __attribute__((unused));
const struct oom_event *unused_oom_event __attribute__((unused));
const enum event_kind *unused_event_kind __attribute__((unused));
const enum exec_flags *unused_exec_flags __attribute__((unused));
const enum config_key *unused_config_key __attribute__((unused));
const enum limits *unused_limits __attribute__((unused));

/* The one ring buffer; its size is set by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* Records that did not fit in the ring buffer, per kind and per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KIND_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* execs whose filename could not be kept in `pending` (the table was full):
 * if they fail, their exec_failed is lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pending_drops SEC(".maps");

/* Watched cgroup ids (v2 cgroup inode numbers). The value is unused by the
 * kernel side; the Go side keeps the session ids. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} watched SEC(".maps");

/* Settings written by the loader, indexed by enum config_key. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CONFIG_MAX);
	__type(key, __u32);
	__type(value, __u32);
} settings SEC(".maps");

/* One exec record under construction per CPU. A plain array indexed by CPU
 * because per-CPU array values are limited to 32 KiB. tp_btf programs run
 * with migration disabled and sched_process_exec does not nest. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized to the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct exec_event);
} exec_scratch SEC(".maps");

/* The filename of an execve in flight, keyed by thread id, kept from
 * sys_enter_execve to sys_exit_execve so that a failure can name it. */
struct pending_exec {
	__u32 len;
	__u32 flags;
	char filename[FILENAME_MAX_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct pending_exec);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pending_exec);
} pending_scratch SEC(".maps");

static __always_inline void count_drop(__u32 kind)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &kind);
	if (n)
		*n += 1;
}

static __always_inline __u64 cgroup_of(struct cgroup *cg)
{
	return BPF_CORE_READ(cg, kn, id);
}

/* watched_cgroup returns the watched cgroup id that the task's v2 cgroup is,
 * or is nested in, and sets *own to the task's own cgroup id. It returns 0 when
 * nothing matches; in host-wide mode the caller records the event anyway. */
static __always_inline __u64 watched_cgroup(struct task_struct *task, __u64 *own)
{
	struct cgroup *cg = BPF_CORE_READ(task, cgroups, dfl_cgrp);
	__u64 id = cgroup_of(cg);
	*own = id;
	for (int i = 0; i < CGROUP_MAX_NEST; i++) {
		if (!cg)
			break;
		id = cgroup_of(cg);
		if (bpf_map_lookup_elem(&watched, &id))
			return id;
		struct cgroup_subsys_state *parent = BPF_CORE_READ(cg, self.parent);
		if (!parent)
			break;
		cg = BPF_CORE_READ(parent, cgroup);
	}
	return 0;
}

static __always_inline bool host_wide(void)
{
	__u32 key = CONFIG_HOST_WIDE;
	__u32 *v = bpf_map_lookup_elem(&settings, &key);
	return v && *v;
}

/* wakeup returns the flags for submitting a record: batch the reader's
 * wake-ups until CONFIG_WAKEUP_BYTES are waiting. */
static __always_inline __u64 wakeup(void)
{
	__u32 key = CONFIG_WAKEUP_BYTES;
	__u32 *v = bpf_map_lookup_elem(&settings, &key);
	if (!v || !*v)
		return 0;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= *v)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* selected reports whether events of the task are recorded, and fills the
 * cgroup fields of the header. */
static __always_inline bool selected(struct task_struct *task, struct event_header *h)
{
	__u64 own = 0;
	__u64 w = watched_cgroup(task, &own);
	h->cgroup_id = own;
	h->watched = w;
	return w != 0 || host_wide();
}

static __always_inline void fill_header(struct event_header *h, __u32 kind, struct task_struct *task)
{
	h->kind = kind;
	h->pid = BPF_CORE_READ(task, tgid);
	h->ts = bpf_ktime_get_boot_ns();
	bpf_probe_read_kernel_str(h->comm, sizeof(h->comm), &task->comm);
}

/* pipe_ino returns the pipefs inode number of the task's file descriptor fd,
 * or 0 when it is not an anonymous pipe. */
static __always_inline __u64 pipe_ino(struct task_struct *task, unsigned int fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt)
		return 0;
	if (BPF_CORE_READ(fdt, max_fds) <= fd)
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	struct inode *ino = BPF_CORE_READ(f, f_inode);
	if (!ino)
		return 0;
	if (BPF_CORE_READ(ino, i_sb, s_magic) != PIPEFS_MAGIC)
		return 0;
	if (!BPF_CORE_READ(ino, i_pipe))
		return 0;
	return BPF_CORE_READ(ino, i_ino);
}

static __always_inline struct exec_event *exec_record(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&exec_scratch, &cpu);
}

/* The state of the cwd walk, one bpf_loop step per dentry. The loops run
 * under bpf_loop so that the verifier checks each step once. */
struct cwd_walk {
	struct dentry *dentry;
	struct vfsmount *vfsmnt;
	struct mount *mnt;
	struct dentry *root_dentry;
	struct vfsmount *root_mnt;
	__u32 start;
	__u32 off;
	bool done;
};

static long cwd_step(__u64 i, void *arg)
{
	struct cwd_walk *w = arg;
	struct dentry *dentry = w->dentry;
	struct vfsmount *vfsmnt = w->vfsmnt;
	struct mount *mnt = w->mnt;

	if (dentry == w->root_dentry && vfsmnt == w->root_mnt) {
		w->done = true;
		return 1;
	}
	struct dentry *mnt_root = BPF_CORE_READ(vfsmnt, mnt_root);
	struct dentry *parent = BPF_CORE_READ(dentry, d_parent);
	if (dentry == mnt_root || dentry == parent) {
		if (dentry != mnt_root) {
			/* Outside the mount's tree (a lazily unmounted or
			 * otherwise unreachable directory). */
			w->done = true;
			return 1;
		}
		struct mount *mnt_parent = BPF_CORE_READ(mnt, mnt_parent);
		if (mnt == mnt_parent) {
			w->done = true;
			return 1;
		}
		w->dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mnt = mnt_parent;
		w->vfsmnt = &mnt_parent->mnt;
		return 0;
	}
	__u32 off = w->off;
	if (off - w->start > CWD_MAX - NAME_MAX_LEN || off > EXEC_DATA_MASK_CWD)
		return 1;
	struct exec_event *e = exec_record();
	if (!e)
		return 1;
	const unsigned char *name = BPF_CORE_READ(dentry, d_name.name);
	long n = bpf_probe_read_kernel_str(&e->data[off & EXEC_DATA_MASK_CWD], NAME_MAX_LEN, name);
	if (n <= 0)
		return 1;
	w->off = off + n;
	w->dentry = parent;
	return 0;
}

/* read_cwd writes the components of the task's working directory, from the
 * leaf up to the root, each NUL-terminated, starting at data[off]. It walks
 * dentries and crosses mounts through struct mount, stopping at the task's
 * root. It returns the number of bytes written. */
static __always_inline __u32 read_cwd(struct task_struct *task, struct exec_event *e, __u32 off)
{
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	struct cwd_walk w = {
		.dentry = BPF_CORE_READ(fs, pwd.dentry),
		.vfsmnt = BPF_CORE_READ(fs, pwd.mnt),
		.root_dentry = BPF_CORE_READ(fs, root.dentry),
		.root_mnt = BPF_CORE_READ(fs, root.mnt),
		.start = off,
		.off = off,
	};
	w.mnt = container_of(w.vfsmnt, struct mount, mnt);
	bpf_loop(CWD_MAX_DEPTH, cwd_step, &w, 0);
	if (!w.done)
		e->flags |= EXEC_CWD_TRUNCATED;
	return w.off - w.start;
}

struct argv_copy {
	unsigned long start;
	__u64 len;
	__u64 off;
	__u64 got;
	bool fault;
};

static long argv_step(__u64 i, void *arg)
{
	struct argv_copy *a = arg;
	if (a->got >= a->len)
		return 1;
	__u64 n = a->len - a->got;
	if (n > ARGV_CHUNK)
		n = ARGV_CHUNK;
	__u64 at = (a->off & EXEC_DATA_MASK_ARGV) + (a->got & (ARGV_MAX - 1));
	if (at > EXEC_DATA_SIZE - ARGV_CHUNK)
		return 1;
	struct exec_event *e = exec_record();
	if (!e)
		return 1;
	if (bpf_probe_read_user(&e->data[at], n, (void *)(a->start + a->got))) {
		a->fault = true;
		return 1;
	}
	a->got += n;
	return 0;
}

/* read_argv copies the argument area of the new program, at most ARGV_MAX
 * bytes, in chunks, starting at data[off]. */
static __always_inline __u32 read_argv(struct task_struct *task, struct exec_event *e, __u32 off)
{
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	unsigned long start = BPF_CORE_READ(mm, arg_start);
	unsigned long end = BPF_CORE_READ(mm, arg_end);
	if (end <= start)
		return 0;
	struct argv_copy a = {.start = start, .len = end - start, .off = off};
	if (a.len > ARGV_MAX) {
		a.len = ARGV_MAX;
		e->flags |= EXEC_ARGV_TRUNCATED;
	}
	bpf_loop(ARGV_CHUNKS, argv_step, &a, 0);
	if (a.fault)
		e->flags |= EXEC_ARGV_FAULT | EXEC_ARGV_TRUNCATED;
	return a.got;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	struct exec_event *e = exec_record();
	if (!e)
		return 0;
	if (!selected(task, &e->hdr))
		return 0;
	/* A thread other than the leader that execs takes the leader's pid, so
	 * sys_exit_execve would not find its entry under the old thread id. */
	__u32 old_tid = old_pid;
	bpf_map_delete_elem(&pending, &old_tid);
	fill_header(&e->hdr, KIND_EXEC, task);
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->euid = BPF_CORE_READ(task, cred, euid.val);
	e->auid = BPF_CORE_READ(task, loginuid.val);
	e->start_time = BPF_CORE_READ(task, start_boottime);
	e->stdin_pipe = pipe_ino(task, 0);
	e->stdout_pipe = pipe_ino(task, 1);
	e->flags = 0;

	__u32 off = 0;
	const char *filename = BPF_CORE_READ(bprm, filename);
	long n = bpf_probe_read_kernel_str(&e->data[0], FILENAME_MAX_LEN, filename);
	if (n > 0) {
		off = n - 1; /* without the NUL */
		if (n == FILENAME_MAX_LEN)
			e->flags |= EXEC_FILENAME_TRUNCATED;
	}
	e->filename_len = off;

	__u32 cl = read_cwd(task, e, off);
	e->cwd_len = cl;
	off += cl;

	__u32 al = read_argv(task, e, off);
	e->argv_len = al;
	off += al;

	__u64 size = offsetof(struct exec_event, data) + off;
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (bpf_ringbuf_output(&events, e, size, wakeup()))
		count_drop(KIND_EXEC);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	/* Threads are not processes. */
	if (BPF_CORE_READ(child, pid) != BPF_CORE_READ(child, tgid))
		return 0;
	struct event_header h = {};
	/* The child's cgroup: with CLONE_INTO_CGROUP it differs from the parent's. */
	if (!selected(child, &h))
		return 0;
	struct fork_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_FORK);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_FORK, parent);
	e->child_pid = BPF_CORE_READ(child, tgid);
	e->uid = BPF_CORE_READ(child, cred, uid.val);
	e->child_start_time = BPF_CORE_READ(child, start_boottime);
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(handle_exit, struct task_struct *task)
{
	__u32 tid = BPF_CORE_READ(task, pid);
	/* An execve that never returned leaves its pending entry behind. */
	bpf_map_delete_elem(&pending, &tid);
	if (tid != BPF_CORE_READ(task, tgid))
		return 0;
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	struct exit_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_EXIT);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_EXIT, task);
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->exit_code = BPF_CORE_READ(task, exit_code);
	e->start_time = BPF_CORE_READ(task, start_boottime);
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}

static __always_inline int enter_exec(const char *filename)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	__u32 zero = 0;
	struct pending_exec *p = bpf_map_lookup_elem(&pending_scratch, &zero);
	if (!p)
		return 0;
	p->flags = 0;
	long n = bpf_probe_read_user_str(p->filename, sizeof(p->filename), filename);
	if (n <= 0) {
		p->len = 0;
	} else {
		p->len = n - 1;
		if (n == sizeof(p->filename))
			p->flags |= EXEC_FILENAME_TRUNCATED;
	}
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (bpf_map_update_elem(&pending, &tid, p, BPF_ANY)) {
		__u64 *n = bpf_map_lookup_elem(&pending_drops, &zero);
		if (n)
			*n += 1;
	}
	return 0;
}

static __always_inline int exit_exec(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending_exec *p = bpf_map_lookup_elem(&pending, &tid);
	if (!p)
		return 0;
	if (ret >= 0) {
		bpf_map_delete_elem(&pending, &tid);
		return 0;
	}
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct event_header h = {};
	selected(task, &h);
	struct exec_failed_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_EXEC_FAILED);
		bpf_map_delete_elem(&pending, &tid);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_EXEC_FAILED, task);
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->ret = ret;
	e->flags = p->flags;
	__u32 len = p->len;
	if (len > FILENAME_MAX_LEN)
		len = FILENAME_MAX_LEN;
	e->filename_len = len;
	bpf_probe_read_kernel(e->filename, sizeof(e->filename), p->filename);
	bpf_ringbuf_submit(e, wakeup());
	bpf_map_delete_elem(&pending, &tid);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_execve")
int enter_execve(struct syscall_trace_enter *ctx)
{
	return enter_exec((const char *)ctx->args[0]);
}

SEC("tracepoint/syscalls/sys_enter_execveat")
int enter_execveat(struct syscall_trace_enter *ctx)
{
	return enter_exec((const char *)ctx->args[1]);
}

SEC("tracepoint/syscalls/sys_exit_execve")
int exit_execve(struct syscall_trace_exit *ctx)
{
	return exit_exec(ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_execveat")
int exit_execveat(struct syscall_trace_exit *ctx)
{
	return exit_exec(ctx->ret);
}

SEC("tp_btf/mark_victim")
int BPF_PROG(handle_oom_victim, struct task_struct *task, uid_t uid)
{
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	struct oom_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_OOM_VICTIM);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_OOM_VICTIM, task);
	e->uid = uid;
	e->_pad = 0;
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}
