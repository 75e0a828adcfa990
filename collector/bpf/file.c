//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The file programs of the sandtrail collector: opens (read, write, create),
 * directory creations, deletes, renames, links, truncates, chmods and mounts
 * of the processes in watched session cgroups, and their ptrace attach,
 * seize and traceme requests, from the syscall tracepoints.
 *
 * One program, attached to the sys_exit tracepoint of every traced syscall
 * (the attach cookie says which syscall), builds the record: the result is
 * the tracepoint's, and the arguments are still in the task's saved user
 * registers, so no program runs at the syscall's entry and nothing is kept
 * between the two (an earlier version kept the arguments in a hash map from
 * sys_enter; that map and its programs cost more than the record). Paths are
 * made absolute in the kernel where it can: a successful open is named by
 * the walk of the opened file's own f_path; a path given by the caller is
 * sent as given, with the walk of the directory it is relative to (the dirfd
 * or the cwd) when it is relative, and Go joins the two.
 *
 * Volume: reads are kept only beneath sensitive names (file_sensitive,
 * filled by Go: the nearest registered ancestor of the opened file decides,
 * at the open, also beneath names that did not exist when they were
 * registered),
 * and operations on a struct file of a pseudo file system or a character
 * device (/dev/null, /proc/self/..., pipes) are not recorded.
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "common.h"
#include "shared.h"
#include "file.h"

char LICENSE[] SEC("license") = "GPL";

/* Export the types to bpf2go. */
const struct file_event *unused_file_event __attribute__((unused));
const struct file_key *unused_file_key __attribute__((unused));
const enum file_op *unused_file_op __attribute__((unused));
const enum file_sys *unused_file_sys __attribute__((unused));
const enum file_part *unused_file_part __attribute__((unused));
const enum file_record_flags *unused_file_record_flags __attribute__((unused));
const enum file_verdict *unused_file_verdict __attribute__((unused));
const enum file_config *unused_file_config __attribute__((unused));
const enum file_reads *unused_file_reads __attribute__((unused));

#define AT_FDCWD -100
#define AT_REMOVEDIR 0x200
#define O_ACCMODE 03
#define O_CREAT 0100
#define O_TRUNC 01000
#define O_WRONLY 01
/* include/linux/fs.h: the open created the file. */
#define FMODE_CREATED (1 << 20)
#define S_IFMT 0170000
#define S_IFCHR 0020000
/* include/uapi/linux/ptrace.h: the requests that start tracing. */
#define PTRACE_TRACEME 0
#define PTRACE_ATTACH 16
#define PTRACE_SEIZE 0x4206

/* Super block magics of pseudo file systems (include/uapi/linux/magic.h). */
#define PROC_SUPER_MAGIC 0x9fa0
#define SYSFS_MAGIC 0x62656572
#define CGROUP_SUPER_MAGIC 0x27e0eb
#define CGROUP2_SUPER_MAGIC 0x63677270
#define DEVPTS_SUPER_MAGIC 0x1cd1
#define DEBUGFS_MAGIC 0x64626720
#define TRACEFS_MAGIC 0x74726163
#define SECURITYFS_MAGIC 0x73636673
#define BPF_FS_MAGIC 0xcafe4a11
#define PIPEFS_MAGIC 0x50495045
#define SOCKFS_MAGIC 0x534F434B
#define ANON_INODE_FS_MAGIC 0x09041934
#define NSFS_MAGIC 0x6e736673
#define PID_FS_MAGIC 0x50494446

/* One record under construction per CPU. A plain array indexed by CPU, like
 * exec_scratch: syscall tracepoint programs do not nest on a CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized to the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct file_event);
} file_scratch SEC(".maps");

/* Sensitive names: (directory, entry name) -> enum file_verdict. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct file_key);
	__type(value, __u32);
} file_sensitive SEC(".maps");

/* A bit set (file.h) of the directories in file_sensitive's keys (the bit
 * of the directory's inode number) and of the keys themselves (the bit of
 * the inode number, the name's length and its first eight bytes), written
 * by Go before the keys and cleared after. read_verdict looks a dentry up in
 * file_sensitive only when both bits are set: its parent's, and its own
 * (collisions only cost a lookup). An array lookup is inlined by the
 * verifier, a few instructions per dentry, where a lookup of file_sensitive
 * (a copy of the name, a hash of the 64-byte key) costs about 50 ns. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FILE_ANCHOR_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} file_anchor SEC(".maps");

static __always_inline bool bit_set(__u32 bit)
{
	__u32 word = bit >> 6;
	__u64 *w = bpf_map_lookup_elem(&file_anchor, &word);
	return w && ((*w >> (bit & 63)) & 1);
}

static __always_inline bool anchored(__u64 ino)
{
	return bit_set((ino * FILE_ANCHOR_MUL) >> (64 - FILE_ANCHOR_LOG));
}

/* name_listed reports whether dentry, in the directory with inode number
 * ino, may be a key of file_sensitive: whether the bit of (ino, the name's
 * length, its first eight bytes) is set. A name not kept in the dentry
 * itself (a long one), or a kernel without d_shortname, is looked up
 * always. */
static __always_inline bool name_listed(struct dentry *dentry, __u64 ino)
{
	if (!HAVE_BTF_CAST || !bpf_core_field_exists(dentry->d_shortname))
		return true;
	__u32 len = dentry->d_name.len;
	if (len == 0 || len >= sizeof(dentry->d_shortname) ||
	    (const void *)dentry->d_name.name != (const void *)&dentry->d_shortname)
		return true;
	__u64 w = dentry->d_shortname.words[0];
	if (len < 8)
		w &= (1ULL << (len * 8)) - 1;
	__u64 x = (ino ^ ((__u64)len << 56)) * FILE_ANCHOR_MUL;
	x = (x ^ w) * FILE_NAME_MUL;
	return bit_set(x >> (64 - FILE_ANCHOR_LOG));
}

/* Settings written by Go, indexed by enum file_config. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FILE_CONFIG_MAX);
	__type(key, __u32);
	__type(value, __u32);
} file_settings SEC(".maps");

static __always_inline struct file_event *file_record(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&file_scratch, &cpu);
}

static __always_inline __u32 reads_mode(void)
{
	__u32 key = FILE_CONFIG_READS;
	__u32 *v = bpf_map_lookup_elem(&file_settings, &key);
	return v ? *v : FILE_READS_NONE;
}

static long file_walk_step(__u64 i, void *arg)
{
	struct file_event *e = file_record();
	if (!e)
		return 1;
	return path_walk_step(arg, e->data, FILE_DATA_MASK);
}

/* The walk that decides a read: the dentries of the path walk, in the same
 * order, leaf first, without writing names. For each dentry it looks up the
 * inode number of its parent (the directory of the file_sensitive key that
 * would name it) in file_anchor, and only when it is there reads the name and looks
 * the key up in file_sensitive. The first key found decides: its verdict,
 * or, when it has a trie node, the deepest of the names beneath it that
 * the dentries walked below it spell (read_descend). below holds the last
 * FILE_NODE_DEPTH dentries walked, as numbers (btf_cast makes them
 * pointers again). */
struct read_walk {
	struct path_walk w;
	__u64 below[FILE_NODE_DEPTH];
	__u32 depth; /* dentries walked below the current one */
	__u32 value; /* the value of the key found */
};

/* file_key_of fills k with the name of dentry beneath the directory (or
 * trie node) ino. */
static __always_inline void file_key_of(struct file_key *k, __u64 ino, struct dentry *dentry)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->ino = ino;
	bpf_probe_read_kernel_str(k->name, sizeof(k->name), KREAD(dentry, d_name.name));
}

static long read_walk_step(__u64 i, void *arg)
{
	struct read_walk *rw = arg;
	struct dentry *dentry = rw->w.dentry;
	struct dentry *parent = KREAD(dentry, d_parent);
	__u64 ino = 0;
	if (parent) {
		struct inode *inode = KREAD(parent, d_inode);
		if (inode)
			ino = KREAD(inode, i_ino);
	}
	if (anchored(ino) && name_listed(dentry, ino)) {
		struct file_key k;
		file_key_of(&k, ino, dentry);
		__u32 *v = bpf_map_lookup_elem(&file_sensitive, &k);
		if (v && *v) {
			rw->value = *v;
			return 1;
		}
	}
	int move = path_walk_up(&rw->w, parent);
	if (move == PATH_WALK_NAME) {
		rw->below[rw->depth & (FILE_NODE_DEPTH - 1)] = (__u64)dentry;
		rw->depth++;
		rw->w.dentry = parent;
	}
	return move == PATH_WALK_END;
}

/* read_descend_step takes the i-th dentry below the key found (its child
 * first) beneath the trie node of rw->value; it ends when the node has no
 * entry of that name, or there is no node or no dentry left. */
static long read_descend_step(__u64 i, void *arg)
{
	struct read_walk *rw = arg;
	__u32 node = rw->value >> FILE_NODE_SHIFT;
	if (!node || i >= rw->depth)
		return 1;
	__u32 at = (rw->depth - 1 - (__u32)i) & (FILE_NODE_DEPTH - 1);
	struct dentry *dentry = btf_cast(rw->below[at], struct dentry);
	struct file_key k;
	file_key_of(&k, FILE_NODE_INO | node, dentry);
	__u32 *v = bpf_map_lookup_elem(&file_sensitive, &k);
	if (!v || !*v)
		return 1;
	rw->value = *v;
	return 0;
}

/* read_verdict returns the verdict of the nearest registered ancestor of the
 * file f (itself included), 0 when none. */
static __always_inline __u32 read_verdict(struct task_struct *task, struct file *f)
{
	struct read_walk rw = {};
	path_walk_init(&rw.w, task, KREAD(f, f_path.dentry), KREAD(f, f_path.mnt), 0);
	bpf_loop(CWD_MAX_DEPTH, read_walk_step, &rw, 0);
	if (rw.value >> FILE_NODE_SHIFT)
		bpf_loop(FILE_NODE_DEPTH, read_descend_step, &rw, 0);
	return rw.value & FILE_VERDICT_MASK;
}

/* put_walk writes the walk of (d, m) as part `part` at data[off] and returns
 * the offset after it. */
static __always_inline __u32 put_walk(struct task_struct *task, struct file_event *e, __u32 off,
				      struct dentry *d, struct vfsmount *m, __u32 part, __u32 cut)
{
	struct path_walk w;
	path_walk_init(&w, task, d, m, off);
	bpf_loop(CWD_MAX_DEPTH, file_walk_step, &w, 0);
	if (!w.done)
		e->rflags |= cut;
	e->len[part & (FILE_PARTS - 1)] = w.off - w.start;
	return w.off;
}

/* put_string copies a NUL-terminated string from the caller as part
 * `part` (without its NUL) and returns the offset after it. */
static __always_inline __u32 put_string(struct file_event *e, __u32 off, const char *s, __u32 part)
{
	if (!s)
		return off;
	if (off > FILE_DATA_MASK) {
		e->rflags |= FILE_STRING_CUT;
		return off;
	}
	long n = bpf_probe_read_user_str(&e->data[off & FILE_DATA_MASK], FILE_STRING_MAX, s);
	if (n <= 0) {
		e->rflags |= FILE_STRING_CUT;
		return off;
	}
	if (n == FILE_STRING_MAX)
		e->rflags |= FILE_STRING_CUT;
	e->len[part & (FILE_PARTS - 1)] = n - 1;
	return off + n - 1;
}

/* put_base writes, when the string at data[str_off] (part str_part) is a
 * relative path, the walk of the directory it is relative to: the cwd for
 * AT_FDCWD, else the directory open on dfd. */
static __always_inline __u32 put_base(struct task_struct *task, struct file_event *e, __u32 off,
				      __u32 str_off, __u32 str_part, long dfd, __u32 part, __u32 cut,
				      __u32 none)
{
	if (e->len[str_part & (FILE_PARTS - 1)] > 0 && e->data[str_off & FILE_DATA_MASK] == '/')
		return off;
	struct dentry *d;
	struct vfsmount *m;
	if ((int)dfd == AT_FDCWD) {
		struct fs_struct *fs = task->fs;
		if (!fs) {
			e->rflags |= none;
			return off;
		}
		d = fs->pwd.dentry;
		m = fs->pwd.mnt;
	} else {
		struct file *f = task_file(task, (unsigned int)dfd);
		if (!f) {
			e->rflags |= none;
			return off;
		}
		d = KREAD(f, f_path.dentry);
		m = KREAD(f, f_path.mnt);
	}
	return put_walk(task, e, off, d, m, part, cut);
}

/* pseudo reports whether writes to f are not recorded: character devices
 * (/dev/null, ttys) and files of pseudo file systems. */
static __always_inline bool pseudo(struct file *f)
{
	struct inode *ino = KREAD(f, f_inode);
	if (!ino)
		return true;
	if ((KREAD(ino, i_mode) & S_IFMT) == S_IFCHR)
		return true;
	switch (KREAD2(ino, i_sb, s_magic)) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case DEVPTS_SUPER_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case BPF_FS_MAGIC:
	case PIPEFS_MAGIC:
	case SOCKFS_MAGIC:
	case ANON_INODE_FS_MAGIC:
	case NSFS_MAGIC:
	case PID_FS_MAGIC:
		return true;
	}
	return false;
}

/* ptrace_record sends the record of a ptrace request that starts tracing
 * (traceme, attach, seize), which returned ret; other requests are not
 * recorded. x holds the syscall's arguments: request, pid. */
static __always_inline int ptrace_record(struct task_struct *task, struct file_event *e, __u64 *x, long ret)
{
	long req = x[0];
	if (req != PTRACE_TRACEME && req != PTRACE_ATTACH && req != PTRACE_SEIZE)
		return 0;
	fill_header(&e->hdr, KIND_FILE, task);
	const struct cred *cred = task->cred;
	e->uid = cred ? cred->uid.val : 0;
	e->op = FILE_OP_PTRACE;
	e->ret = ret;
	e->flags = req;
	e->rflags = 0;
	/* traceme names no pid: the caller's parent becomes its tracer. */
	e->target_pid = req == PTRACE_TRACEME ? BPF_CORE_READ(task, real_parent, tgid) : x[1];
	for (int i = 0; i < FILE_PARTS; i++)
		e->len[i] = 0;
	if (bpf_ringbuf_output(&events, e, offsetof(struct file_event, data), wakeup()))
		count_drop(KIND_FILE, e->hdr.watched);
	return 0;
}

/* What a syscall's arguments say, in one shape. */
struct file_args {
	const char *path;
	const char *new_path;
	const char *source;
	const char *fstype;
	long dfd;
	long new_dfd;
	long fd; /* the fd whose struct file names the path; -1 for none */
	const char *target; /* a symbolic link's target */
	__u32 flags;
	__u32 op;
	__u32 rflags;
	bool open;
};

/* file_exit_record builds and sends the record of syscall sys (enum
 * file_sys), which returned ret, when the task is selected and the
 * operation is one that is kept. */
static __always_inline int file_exit_record(__u32 sys, long ret)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct file_event *e = file_record();
	if (!e)
		return 0;
	/* First, because most syscalls on a host are not a session's. */
	if (!selected(task, &e->hdr))
		return 0;
	struct file_args a = {.dfd = AT_FDCWD, .new_dfd = AT_FDCWD, .fd = -1};
	__u64 x[5];
	syscall_args(task, x);
	switch (sys) {
	case FILE_SYS_OPENAT:
		a.dfd = x[0], a.path = (const char *)x[1], a.flags = x[2], a.open = true;
		break;
	case FILE_SYS_OPENAT2: {
		__u64 fl = 0;
		bpf_probe_read_user(&fl, sizeof(fl), (void *)x[2]); /* open_how.flags */
		a.dfd = x[0], a.path = (const char *)x[1], a.flags = fl, a.open = true;
		break;
	}
	case FILE_SYS_OPEN:
		a.path = (const char *)x[0], a.flags = x[1], a.open = true;
		break;
	case FILE_SYS_CREAT:
		a.path = (const char *)x[0], a.flags = O_CREAT | O_WRONLY | O_TRUNC, a.open = true;
		break;
	case FILE_SYS_UNLINKAT:
		a.dfd = x[0], a.path = (const char *)x[1], a.flags = x[2], a.op = FILE_OP_DELETE;
		break;
	case FILE_SYS_UNLINK:
		a.path = (const char *)x[0], a.op = FILE_OP_DELETE;
		break;
	case FILE_SYS_RMDIR:
		a.path = (const char *)x[0], a.flags = AT_REMOVEDIR, a.op = FILE_OP_DELETE;
		break;
	case FILE_SYS_RENAMEAT2:
		a.flags = x[4];
		/* fall through */
	case FILE_SYS_RENAMEAT:
		a.dfd = x[0], a.path = (const char *)x[1], a.new_dfd = x[2], a.new_path = (const char *)x[3];
		a.op = FILE_OP_RENAME;
		break;
	case FILE_SYS_RENAME:
		a.path = (const char *)x[0], a.new_path = (const char *)x[1], a.op = FILE_OP_RENAME;
		break;
	case FILE_SYS_MOUNT:
		a.source = (const char *)x[0], a.path = (const char *)x[1], a.fstype = (const char *)x[2];
		a.flags = x[3], a.op = FILE_OP_MOUNT;
		break;
	case FILE_SYS_UMOUNT2:
		a.path = (const char *)x[0], a.flags = x[1], a.op = FILE_OP_MOUNT, a.rflags = FILE_UMOUNT;
		break;
	case FILE_SYS_MOVE_MOUNT:
		/* The from path (often empty, with a mount fd) is the source;
		 * the to path is the mount point. */
		a.source = (const char *)x[1], a.dfd = x[2], a.path = (const char *)x[3], a.flags = x[4];
		a.op = FILE_OP_MOUNT, a.rflags = FILE_MOVE_MOUNT;
		break;
	case FILE_SYS_TRUNCATE:
		a.path = (const char *)x[0], a.op = FILE_OP_TRUNCATE;
		break;
	case FILE_SYS_FTRUNCATE:
		a.fd = x[0], a.op = FILE_OP_TRUNCATE;
		break;
	case FILE_SYS_CHMOD:
		a.path = (const char *)x[0], a.flags = x[1], a.op = FILE_OP_CHMOD;
		break;
	case FILE_SYS_FCHMODAT:
	case FILE_SYS_FCHMODAT2:
		a.dfd = x[0], a.path = (const char *)x[1], a.flags = x[2], a.op = FILE_OP_CHMOD;
		break;
	case FILE_SYS_FCHMOD:
		a.fd = x[0], a.flags = x[1], a.op = FILE_OP_CHMOD;
		break;
	case FILE_SYS_MKDIRAT:
		a.dfd = x[0], a.path = (const char *)x[1], a.flags = x[2];
		a.op = FILE_OP_CREATE, a.rflags = FILE_DIR;
		break;
	case FILE_SYS_MKDIR:
		a.path = (const char *)x[0], a.flags = x[1], a.op = FILE_OP_CREATE, a.rflags = FILE_DIR;
		break;
	case FILE_SYS_SYMLINKAT:
		a.target = (const char *)x[0], a.dfd = x[1], a.path = (const char *)x[2];
		a.op = FILE_OP_LINK, a.rflags = FILE_SYMLINK;
		break;
	case FILE_SYS_SYMLINK:
		a.target = (const char *)x[0], a.path = (const char *)x[1];
		a.op = FILE_OP_LINK, a.rflags = FILE_SYMLINK;
		break;
	case FILE_SYS_LINKAT:
		a.new_dfd = x[0], a.new_path = (const char *)x[1], a.dfd = x[2], a.path = (const char *)x[3];
		a.flags = x[4], a.op = FILE_OP_LINK;
		break;
	case FILE_SYS_LINK:
		a.new_path = (const char *)x[0], a.path = (const char *)x[1], a.op = FILE_OP_LINK;
		break;
	case FILE_SYS_PTRACE:
		return ptrace_record(task, e, x, ret);
	default:
		return 0;
	}

	struct file *f = NULL;
	if (a.open) {
		bool write = (a.flags & O_ACCMODE) != 0 || (a.flags & O_TRUNC);
		if (ret >= 0) {
			a.fd = ret;
			f = task_file(task, ret);
			if (f && (KREAD(f, f_mode) & FMODE_CREATED))
				a.op = FILE_OP_CREATE;
			else
				a.op = write ? FILE_OP_WRITE : FILE_OP_READ;
		} else if (a.flags & O_CREAT) {
			a.op = FILE_OP_CREATE;
		} else {
			a.op = write ? FILE_OP_WRITE : FILE_OP_READ;
		}
	} else if (a.fd >= 0) {
		f = task_file(task, a.fd);
		if (!f)
			return 0; /* a bad fd names nothing */
	}
	__u32 reads = FILE_READS_NONE;
	if (a.op == FILE_OP_READ) {
		reads = reads_mode();
		if (reads == FILE_READS_NONE)
			return 0;
		if (f && reads == FILE_READS_MAP) {
			/* Decided before anything is written: most reads
			 * are not sensitive. */
			__u32 v = read_verdict(task, f);
			if (v == FILE_MAYBE)
				a.rflags |= FILE_CHECK_PATH;
			else if (v != FILE_SENSITIVE)
				return 0;
		}
	} else if (f && pseudo(f)) {
		return 0;
	}

	fill_header(&e->hdr, KIND_FILE, task);
	const struct cred *cred = task->cred;
	e->uid = cred ? cred->uid.val : 0;
	e->op = a.op;
	e->ret = ret;
	e->flags = a.flags;
	e->rflags = a.rflags;
	e->target_pid = 0;
	for (int i = 0; i < FILE_PARTS; i++)
		e->len[i] = 0;

	__u32 off = 0;
	if (f) {
		/* The kernel's own name for the file. */
		e->rflags |= FILE_PATH_WALKED;
		off = put_walk(task, e, off, KREAD(f, f_path.dentry), KREAD(f, f_path.mnt), FILE_PART_WALK,
			       FILE_WALK_CUT);
	} else {
		if (a.op == FILE_OP_READ && reads == FILE_READS_MAP)
			e->rflags |= FILE_CHECK_PATH;
		__u32 at = off;
		off = put_string(e, off, a.path, FILE_PART_PATH);
		off = put_base(task, e, off, at, FILE_PART_PATH, a.dfd, FILE_PART_BASE, FILE_BASE_CUT, FILE_NO_BASE);
	}
	if (a.new_path) {
		__u32 at = off;
		off = put_string(e, off, a.new_path, FILE_PART_NEW_PATH);
		off = put_base(task, e, off, at, FILE_PART_NEW_PATH, a.new_dfd, FILE_PART_NEW_BASE, FILE_NEW_BASE_CUT,
			       FILE_NO_NEW_BASE);
	}
	off = put_string(e, off, a.source ? a.source : a.target, FILE_PART_SOURCE);
	off = put_string(e, off, a.fstype, FILE_PART_FSTYPE);

	__u64 size = offsetof(struct file_event, data) + off;
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (bpf_ringbuf_output(&events, e, size, wakeup()))
		count_drop(KIND_FILE, e->hdr.watched);
	return 0;
}

/* The exit of every traced syscall: Go attaches it to the sys_exit
 * tracepoint of each, with the syscall's enum file_sys as the cookie. */
SEC("tracepoint/syscalls/sys_exit_file")
int file_exit(struct syscall_trace_exit *ctx)
{
	long ret = ctx->ret;
	/* ERESTARTSYS .. ERESTART_RESTARTBLOCK: the syscall starts again
	 * (and is recorded then), or the caller sees EINTR. */
	if (ret <= -512 && ret >= -516)
		return 0;
	return file_exit_record(bpf_get_attach_cookie(ctx), ret);
}
