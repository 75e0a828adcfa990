//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The process programs of the sandtrail collector: exec, fork, exit, failed
 * exec and OOM victims of the processes in watched session cgroups.
 *
 * The maps and helpers every program shares (the ring buffer, the drop
 * counters, the watched-cgroup table) are in shared.h.
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "common.h"
#include "shared.h"
#include "deny.h"

#define PIPEFS_MAGIC 0x50495045

char LICENSE[] SEC("license") = "GPL";

/* Export the shared types to bpf2go. */
const struct exec_event *unused_exec_event __attribute__((unused));
const struct fork_event *unused_fork_event __attribute__((unused));
const struct exit_event *unused_exit_event __attribute__((unused));
const struct exec_failed_event *unused_exec_failed_event __attribute__((unused));
const struct oom_event *unused_oom_event __attribute__((unused));
const enum watch_flags *unused_watch_flags __attribute__((unused));
const enum event_kind *unused_event_kind __attribute__((unused));
const enum exec_flags *unused_exec_flags __attribute__((unused));
const enum config_key *unused_config_key __attribute__((unused));
const enum limits *unused_limits __attribute__((unused));

/* One exec record under construction per CPU. A plain array indexed by CPU
 * because per-CPU array values are limited to 32 KiB. tp_btf programs run
 * with migration disabled and sched_process_exec does not nest. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized to the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct exec_event);
} exec_scratch SEC(".maps");




/* pipe_ino returns the pipefs inode number of the task's file descriptor fd,
 * or 0 when it is not an anonymous pipe. */
static __always_inline __u64 pipe_ino(struct task_struct *task, unsigned int fd)
{
	struct file *f = task_file(task, fd);
	if (!f)
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

static long cwd_step(__u64 i, void *arg)
{
	struct exec_event *e = exec_record();
	if (!e)
		return 1;
	return path_walk_step(arg, e->data, EXEC_DATA_MASK_CWD);
}

/* read_cwd writes the components of the task's working directory, from the
 * leaf up to the root, each NUL-terminated, starting at data[off] (see
 * path_walk in shared.h). It returns the number of bytes written. */
static __always_inline __u32 read_cwd(struct task_struct *task, struct exec_event *e, __u32 off)
{
	struct path_walk w;
	path_walk_init(&w, task, BPF_CORE_READ(task, fs, pwd.dentry), BPF_CORE_READ(task, fs, pwd.mnt), off);
	bpf_loop(CWD_MAX_DEPTH, cwd_step, &w, 0);
	if (!w.done)
		e->flags |= EXEC_CWD_TRUNCATED;
	return w.off - w.start;
}

static long exe_step(__u64 i, void *arg)
{
	struct exec_event *e = exec_record();
	if (!e)
		return 1;
	return path_walk_step(arg, e->data, EXEC_DATA_MASK_ARGV);
}

/* read_exe fills the identity of the file the kernel executed (bprm->file:
 * the binary itself, whatever name or descriptor the caller passed, and
 * the script for a #! script) and writes its path's components as read_cwd
 * does. A pseudo file (a memfd) has no path: its one component is its name,
 * as the kernel's d_path names it ("/memfd:NAME (deleted)"). It returns the
 * number of bytes written. */
#define OVERLAYFS_SUPER_MAGIC 0x794c7630

/* The overlay filesystem's inode, in its two layouts: Linux 6.5 and later
 * keep the lower layers in an ovl_entry (oe); earlier kernels keep the
 * lowest in the inode itself (lowerpath). Distributions build overlay as a
 * module, whose types are in the module's BTF: CO-RE finds the fields
 * there while the module is loaded, and bpf_core_field_exists is false when
 * it is not (then Go names the real file from /proc/PID/exe). They are read
 * with bpf_probe_read_kernel in both builds: btf_cast takes only the
 * kernel's own types. */
struct ovl_inode___v65 {
	struct inode vfs_inode;
	struct dentry *__upperdentry;
	struct ovl_entry *oe;
} __attribute__((preserve_access_index));

struct ovl_inode___v61 {
	struct inode vfs_inode;
	struct dentry *__upperdentry;
	struct ovl_path lowerpath;
} __attribute__((preserve_access_index));

/* real_inode returns, for an inode of an overlay (a session's private /tmp
 * is one), the inode of the layer that holds the file, whose device and
 * inode number stat reports for it (ovl_getattr): the upper one once the
 * file is written there, else the lowest. Other inodes are their own. It
 * sets EXEC_EXE_OVERLAY when it cannot tell (no overlay layout in the
 * kernel's BTF). */
static __always_inline struct inode *real_inode(struct inode *ino, struct exec_event *e)
{
	if (KREAD2(ino, i_sb, s_magic) != OVERLAYFS_SUPER_MAGIC)
		return ino;
	struct dentry *d = NULL;
	if (bpf_core_field_exists(struct ovl_inode___v65, oe)) {
		struct ovl_inode___v65 *oi =
			(void *)ino - bpf_core_field_offset(struct ovl_inode___v65, vfs_inode);
		d = BPF_CORE_READ(oi, __upperdentry);
		if (!d) {
			struct ovl_entry *oe = BPF_CORE_READ(oi, oe);
			if (!oe || BPF_CORE_READ(oe, __numlower) == 0)
				return ino;
			d = BPF_CORE_READ(oe, __lowerstack[0].dentry);
		}
	} else if (bpf_core_field_exists(struct ovl_inode___v61, lowerpath)) {
		struct ovl_inode___v61 *oi =
			(void *)ino - bpf_core_field_offset(struct ovl_inode___v61, vfs_inode);
		d = BPF_CORE_READ(oi, __upperdentry);
		if (!d)
			d = BPF_CORE_READ(oi, lowerpath.dentry);
	} else {
		e->flags |= EXEC_EXE_OVERLAY;
		return ino;
	}
	struct inode *r = d ? BPF_CORE_READ(d, d_inode) : 0;
	return r ? btf_cast(r, struct inode) : ino;
}

/* The inode's change time in its three layouts: i_ctime_sec and
 * i_ctime_nsec since Linux 6.11 (vmlinux.h's), __i_ctime from 6.6, i_ctime
 * before. */
struct inode___v66 {
	struct timespec64 __i_ctime;
} __attribute__((preserve_access_index));

struct inode___v61 {
	struct timespec64 i_ctime;
} __attribute__((preserve_access_index));

static __always_inline void read_ctime(struct inode *ino, struct exec_event *e)
{
	if (bpf_core_field_exists(ino->i_ctime_sec)) {
		e->exe_ctime_sec = KREAD(ino, i_ctime_sec);
		e->exe_ctime_nsec = KREAD(ino, i_ctime_nsec);
	} else if (bpf_core_field_exists(struct inode___v66, __i_ctime)) {
		struct inode___v66 *i = (void *)ino;
		e->exe_ctime_sec = BPF_CORE_READ(i, __i_ctime.tv_sec);
		e->exe_ctime_nsec = BPF_CORE_READ(i, __i_ctime.tv_nsec);
	} else {
		struct inode___v61 *i = (void *)ino;
		e->exe_ctime_sec = BPF_CORE_READ(i, i_ctime.tv_sec);
		e->exe_ctime_nsec = BPF_CORE_READ(i, i_ctime.tv_nsec);
	}
}

static __always_inline __u32 read_exe(struct task_struct *task, struct linux_binprm *bprm,
				      struct exec_event *e, __u32 off)
{
	struct file *f = bprm->file;
	if (!f)
		return 0;
	struct inode *ino = f->f_inode;
	if (ino)
		ino = real_inode(ino, e);
	if (ino) {
		e->exe_ino = KREAD(ino, i_ino);
		e->exe_dev = KREAD2(ino, i_sb, s_dev);
		e->exe_nlink = KREAD(ino, __i_nlink);
		read_ctime(ino, e);
	}
	struct dentry *d = f->f_path.dentry;
	struct vfsmount *mnt = f->f_path.mnt;
	struct path_walk w;
	path_walk_init(&w, task, d, mnt, off);
	bpf_loop(CWD_MAX_DEPTH, exe_step, &w, 0);
	bool pseudo = d && d->d_parent == d && d != mnt->mnt_root;
	if (pseudo && w.off == w.start) {
		__u64 at = off;
		/* Keep the bound where the verifier sees it. */
		asm volatile("%[a] &= 0x3fff" : [a] "+r"(at));
		long n = bpf_probe_read_kernel_str(&e->data[at], NAME_MAX_LEN, d->d_name.name);
		if (n > 0)
			w.off += n;
		w.done = true;
	}
	if (!w.done)
		e->flags |= EXEC_EXE_TRUNCATED;
	/* d_unlinked (or a pseudo file's simple_dname): " (deleted)". */
	if (pseudo || (d && d->d_parent != d && !d->d_hash.pprev))
		e->flags |= EXEC_EXE_DELETED;
	return w.off - w.start;
}

/* A copy of user memory into exec_event.data: len bytes from start, to
 * data[off], in ARGV_CHUNK pieces, one per bpf_loop step. */
struct user_copy {
	unsigned long start;
	__u64 len;
	__u64 off;
	__u64 got;
	bool fault;
};

static long copy_step(__u64 i, void *arg)
{
	struct user_copy *a = arg;
	if (a->got >= a->len)
		return 1;
	__u64 n = a->len - a->got;
	if (n > ARGV_CHUNK)
		n = ARGV_CHUNK;
	__u64 at = a->off + a->got;
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

/* copy_user runs a user_copy of at most chunks steps. It returns the bytes
 * copied and sets *fault when a read failed. */
static __always_inline __u32 copy_user(unsigned long start, __u64 len, __u32 off, __u32 chunks, bool *fault)
{
	struct user_copy a = {.start = start, .len = len, .off = off};
	bpf_loop(chunks, copy_step, &a, 0);
	*fault = a.fault;
	return a.got;
}

/* read_argv copies the argument area of the new program, at most ARGV_MAX
 * bytes, starting at data[off], and when it is longer, also its last
 * ARGV_TAIL bytes right after (tail_len). It returns the bytes written. */
static __always_inline __u32 read_argv(struct mm_struct *mm, struct exec_event *e, __u32 off)
{
	unsigned long start = mm->arg_start;
	unsigned long end = mm->arg_end;
	if (end <= start)
		return 0;
	__u64 len = end - start;
	e->argv_size = len;
	if (len > ARGV_MAX) {
		len = ARGV_MAX;
		e->flags |= EXEC_ARGV_TRUNCATED;
	}
	bool fault;
	__u32 got = copy_user(start, len, off, ARGV_CHUNKS, &fault);
	e->argv_len = got;
	if (fault) {
		e->flags |= EXEC_ARGV_FAULT | EXEC_ARGV_TRUNCATED;
		return got;
	}
	if (end - start <= ARGV_MAX)
		return got;
	e->tail_len = copy_user(end - ARGV_TAIL, ARGV_TAIL, off + got, 1, &fault);
	return got + e->tail_len;
}

/* read_env copies the environment area of the new program, at most ENV_MAX
 * bytes, when the loader asked for it (CONFIG_EXEC_ENV). It returns the
 * bytes written. */
static __always_inline __u32 read_env(struct mm_struct *mm, struct exec_event *e, __u32 off)
{
	__u32 key = CONFIG_EXEC_ENV;
	__u32 *on = bpf_map_lookup_elem(&settings, &key);
	if (!on || !*on)
		return 0;
	unsigned long start = mm->env_start;
	unsigned long end = mm->env_end;
	if (end <= start)
		return 0;
	__u64 len = end - start;
	e->env_size = len;
	if (len > ENV_MAX) {
		len = ENV_MAX;
		e->flags |= EXEC_ENV_TRUNCATED;
	}
	bool fault;
	__u32 got = copy_user(start, len, off, ENV_CHUNKS, &fault);
	if (fault)
		e->flags |= EXEC_ENV_TRUNCATED;
	e->env_len = got;
	return got;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	struct exec_event *e = exec_record();
	if (!e)
		return 0;
	if (!selected(task, &e->hdr))
		return 0;
	fill_header(&e->hdr, KIND_EXEC, task);
	e->ppid = BPF_CORE_READ(task, real_parent, tgid);
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->euid = BPF_CORE_READ(task, cred, euid.val);
	e->auid = BPF_CORE_READ(task, loginuid.val);
	e->start_time = BPF_CORE_READ(task, start_boottime);
	e->stdin_pipe = pipe_ino(task, 0);
	e->stdout_pipe = pipe_ino(task, 1);
	e->flags = 0;
	e->exe_ino = 0;
	e->exe_dev = 0;
	e->exe_nlink = 0;
	e->exe_ctime_sec = 0;
	e->exe_ctime_nsec = 0;
	e->argv_len = 0;
	e->argv_size = 0;
	e->argc = bprm->argc;
	e->envc = bprm->envc;
	e->env_size = 0;
	e->tail_len = 0;
	e->env_len = 0;

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

	__u32 xl = read_exe(task, bprm, e, off);
	e->exe_len = xl;
	off += xl;

	struct mm_struct *mm = task->mm;
	if (mm) {
		off += read_argv(mm, e, off);
		off += read_env(mm, e, off);
	}

	__u64 size = offsetof(struct exec_event, data) + off;
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (bpf_ringbuf_output(&events, e, size, wakeup()))
		count_drop(KIND_EXEC, e->hdr.watched);
	return 0;
}

extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, __u64 value) __ksym __weak;

#define SIGKILL 9

/* deny_userns kills child when it is in a user namespace its parent is not
 * in (clone3 with CLONE_NEWUSER, which the seccomp filter cannot see) and
 * the sessions refuse user namespaces, and records it as process.denied of
 * clone3. The tracepoint runs before the child is first woken, so the
 * SIGKILL is pending before its first instruction: it runs nothing in the
 * new namespace. Watch marks a session that refuses user namespaces
 * (DenyUserNamespaces). */
static __always_inline void deny_userns(struct task_struct *parent, struct task_struct *child,
					struct event_header *h)
{
	if (h->watched == 0)
		return;
	__u8 *flags = bpf_map_lookup_elem(&watched, &h->watched);
	if (!flags || !(*flags & WATCH_DENY_USERNS))
		return;
	if (child->cred->user_ns == parent->cred->user_ns)
		return;
	int killed = bpf_send_signal_task && bpf_send_signal_task(child, SIGKILL, PIDTYPE_TGID, 0) == 0;
	struct deny_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_DENIED, h->watched);
		return;
	}
	e->hdr = *h;
	fill_header(&e->hdr, KIND_DENIED, parent);
	e->uid = parent->cred->uid.val;
	e->syscall = killed ? DENY_SYSCALL_CLONE3 : DENY_SYSCALL_CLONE3_ALIVE;
	bpf_ringbuf_submit(e, wakeup());
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
	deny_userns(parent, child, &h);
	struct fork_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_FORK, h.watched);
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
	if (tid != BPF_CORE_READ(task, tgid))
		return 0;
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	struct exit_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_EXIT, h.watched);
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

#define SIGKILL 9

/* exit_exec records a failed execve or execveat, whose filename is argument
 * arg. A failed exec returns to the image that made it, so the filename is
 * read from that image's memory at the exit, through the saved registers
 * (syscall_args): nothing is kept from the syscall's entry. One that failed
 * after the point of no return has lost its image and is being killed
 * (SIGKILL is pending): its filename is not read, and is left empty. */
static __always_inline int exit_exec(long ret, int arg)
{
	if (ret >= 0)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	struct exec_failed_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_EXEC_FAILED, h.watched);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_EXEC_FAILED, task);
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->ret = ret;
	e->flags = 0;
	e->filename_len = 0;
	if (!(task->pending.signal.sig[0] & (1UL << (SIGKILL - 1)))) {
		__u64 x[5];
		syscall_args(task, x);
		long n = bpf_probe_read_user_str(e->filename, sizeof(e->filename), (const char *)x[arg & 1]);
		if (n > 0) {
			e->filename_len = n - 1;
			if (n == sizeof(e->filename))
				e->flags |= EXEC_FILENAME_TRUNCATED;
		}
	}
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_execve")
int exit_execve(struct syscall_trace_exit *ctx)
{
	return exit_exec(ctx->ret, 0);
}

SEC("tracepoint/syscalls/sys_exit_execveat")
int exit_execveat(struct syscall_trace_exit *ctx)
{
	return exit_exec(ctx->ret, 1);
}

SEC("tp_btf/mark_victim")
int BPF_PROG(handle_oom_victim, struct task_struct *task, uid_t uid)
{
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	struct oom_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_OOM_VICTIM, h.watched);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_OOM_VICTIM, task);
	e->uid = uid;
	e->_pad = 0;
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}
