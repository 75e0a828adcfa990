/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The maps and helpers shared by every BPF program of the collector
 * (process.c and the others). Each object declares these maps; the Go loader
 * loads process.c first and hands its maps to the other objects
 * (MapReplacements), so there is one ring buffer, one set of per-kind drop
 * counters, one watched-cgroup table, one settings array and one woken_at.
 *
 * Every record goes to the one ring buffer. When the ring buffer is full the
 * record is not lost silently: the per-kind drop counter is incremented, and
 * the Go side turns the counts into collector.loss events.
 */
#ifndef SANDTRAIL_SHARED_H
#define SANDTRAIL_SHARED_H

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

/* Watched cgroup ids (v2 cgroup inode numbers). The value holds enum
 * watch_flags; the Go side keeps the session ids. */
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

/* The same drops per watched cgroup (its session) and kind, so that each
 * session's losses are its own: Go deletes a cgroup's keys when it stops
 * watching it. A drop whose cgroup is not known, or that finds the table
 * full, is only in drops, and Go reports what drops holds beyond this table
 * as host-wide. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct drop_key);
	__type(value, __u64);
} cgroup_drops SEC(".maps");

/* count_drop counts a record of kind that did not fit in the ring buffer,
 * for the watched cgroup (0: none) it was about. The cgroup's count goes
 * first: Go reads cgroup_drops before drops, so a drop it sees in one and
 * not yet in the other is never taken for a host-wide one. */
static __always_inline void count_drop(__u32 kind, __u64 watched)
{
	if (watched) {
		struct drop_key k = {.cgroup = watched, .kind = kind};
		__u64 *c = bpf_map_lookup_elem(&cgroup_drops, &k);
		if (!c) {
			__u64 zero = 0;
			/* Another CPU may insert it first: the lookup then finds that. */
			bpf_map_update_elem(&cgroup_drops, &k, &zero, BPF_NOEXIST);
			c = bpf_map_lookup_elem(&cgroup_drops, &k);
		}
		if (c)
			__sync_fetch_and_add(c, 1);
	}
	__u64 *n = bpf_map_lookup_elem(&drops, &kind);
	if (n)
		*n += 1;
}

/* The task pointers handed to watched_cgroup, selected and fill_header are
 * BTF pointers (tp_btf arguments, bpf_get_current_task_btf), so their fields
 * are read directly, as checked loads: a bpf_probe_read_kernel call each
 * cost several times more on every event. */

static __always_inline __u64 cgroup_of(struct cgroup *cg)
{
	return cg->kn->id;
}

/* watched_cgroup returns the watched cgroup id that the task's v2 cgroup is,
 * or is nested in, and sets *own to the task's own cgroup id. It returns 0 when
 * nothing matches; in host-wide mode the caller records the event anyway. */
static __always_inline __u64 watched_cgroup(struct task_struct *task, __u64 *own)
{
	struct cgroup *cg = task->cgroups->dfl_cgrp;
	__u64 id = cgroup_of(cg);
	*own = id;
	for (int i = 0; i < CGROUP_MAX_NEST; i++) {
		if (!cg)
			break;
		id = cgroup_of(cg);
		if (bpf_map_lookup_elem(&watched, &id))
			return id;
		struct cgroup_subsys_state *parent = cg->self.parent;
		if (!parent)
			break;
		cg = parent->cgroup;
	}
	return 0;
}

static __always_inline bool host_wide(void)
{
	__u32 key = CONFIG_HOST_WIDE;
	__u32 *v = bpf_map_lookup_elem(&settings, &key);
	return v && *v;
}

/* The ring buffer's consumer position (plus one) when a program last forced
 * a wake-up (wakeup). Shared like the ring buffer it is about, so that one
 * wake-up per reader position serves every object's programs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} woken_at SEC(".maps");

/* Records submitted per CPU, for wakeup: a per-CPU array, private to each
 * object (a count per object is as good as a shared one). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} submitted SEC(".maps");

/* wakeup looks at the ring buffer once every WAKEUP_EVERY records of a CPU:
 * the query reads the consumer position, which the reader writes after
 * every record it takes, so each query is a cache miss on another core's
 * line. Between two looks a CPU adds at most WAKEUP_EVERY records beyond
 * the threshold, a few KiB against a ring buffer of megabytes, and the
 * reader polls in any case. */
#define WAKEUP_EVERY 16

/* wakeup returns the flags for submitting a record: batch the reader's
 * wake-ups until CONFIG_WAKEUP_BYTES are waiting, and then wake it once:
 * until it has consumed something it is awake already, and every wake-up
 * is an interrupt (on a VM, an exit). The reader also polls. */
static __always_inline __u64 wakeup(void)
{
	__u32 key = CONFIG_WAKEUP_BYTES;
	__u32 *v = bpf_map_lookup_elem(&settings, &key);
	if (!v || !*v)
		return 0;
	__u32 zero = 0;
	__u32 *n = bpf_map_lookup_elem(&submitted, &zero);
	if (n && ((*n)++ & (WAKEUP_EVERY - 1)) != 0)
		return BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < *v)
		return BPF_RB_NO_WAKEUP;
	__u64 *at = bpf_map_lookup_elem(&woken_at, &zero);
	if (at) {
		__u64 cons = bpf_ringbuf_query(&events, BPF_RB_CONS_POS) + 1;
		if (*at == cons)
			return BPF_RB_NO_WAKEUP;
		*at = cons;
	}
	return BPF_RB_FORCE_WAKEUP;
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
	h->pid = task->tgid;
	h->ts = bpf_ktime_get_boot_ns();
	/* task->comm always ends in a NUL (its last byte is never written). */
	__u64 *comm = (__u64 *)h->comm;
	comm[0] = *(__u64 *)&task->comm[0];
	comm[1] = *(__u64 *)&task->comm[8];
}

/* The collector is built twice from the same source (gen.go): the fast
 * build for kernels with the bpf_rdonly_cast kfunc (Linux 6.2), and the
 * compat build (SANDTRAIL_COMPAT) for older ones. Code that follows kernel
 * pointers reads their fields with KREAD, and makes a pointer it computed
 * (container_of, an array element, a number kept in a map) a kernel pointer
 * with btf_cast (KREAD2 reads a field of a field's pointer):
 * - in the fast build, btf_cast is bpf_rdonly_cast, which makes p a BTF
 *   pointer whose fields are read with checked loads (a faulting load reads
 *   zero) instead of bpf_probe_read_kernel calls, which cost several times
 *   more each; the verifier inlines it, so it costs nothing at run time;
 * - in the compat build, pointers stay numbers, and KREAD is
 *   bpf_probe_read_kernel (BPF_CORE_READ): the same record, at a higher
 *   cost.
 * HAVE_BTF_CAST says which build this is, for the few places that read a
 * kernel structure in place (a dentry's short name). */
#ifdef SANDTRAIL_COMPAT
#define HAVE_BTF_CAST 0
#define btf_cast(p, type) ((type *)(p))
#define KREAD(p, field) BPF_CORE_READ(p, field)
#define KREAD2(p, a, b) BPF_CORE_READ(p, a, b)
#else
#define HAVE_BTF_CAST 1
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id) __ksym;
#define btf_cast(p, type) ((type *)bpf_rdonly_cast((const void *)(p), bpf_core_type_id_kernel(type)))
#define KREAD(p, field) ((p)->field)
#define KREAD2(p, a, b) ((p)->a->b)
#endif

/* task_file returns the struct file of the task's file descriptor fd, or
 * NULL when fd is not open. */
static __always_inline struct file *task_file(struct task_struct *task, unsigned int fd)
{
	struct files_struct *files = task->files;
	if (!files)
		return NULL;
	struct fdtable *fdt = KREAD(files, fdt);
	if (!fdt)
		return NULL;
	if (KREAD(fdt, max_fds) <= fd)
		return NULL;
	/* fds[fd], read as the first member of a struct that starts with a
	 * struct file pointer (kiocb's ki_filp): a checked load instead of a
	 * bpf_probe_read_kernel call. */
	struct file **fds = KREAD(fdt, fd);
	return KREAD(btf_cast(&fds[fd], struct kiocb), ki_filp);
}

/* real_mount is the struct mount of a vfsmount. */
static __always_inline struct mount *real_mount(struct vfsmount *m)
{
	return btf_cast(container_of(m, struct mount, mnt), struct mount);
}

/* The state of a path walk, one bpf_loop step per dentry: from a dentry up to
 * the task's root (or the global root), crossing mounts through struct mount.
 * process.c walks the cwd of an exec with it and file.c the path of an
 * opened file and the base directory of a relative path (path_walk_step:
 * each component is written NUL-terminated from the leaf up into a caller's
 * buffer; the caller reverses them); file.c's read_verdict visits the same
 * dentries without writing names (path_walk_up). The walk runs under
 * bpf_loop so that the verifier checks one step instead of every iteration;
 * every pointer is a BTF pointer, read with plain loads. */
struct path_walk {
	struct dentry *dentry;
	struct dentry *mnt_root; /* the root of mnt's tree */
	struct mount *mnt;
	struct dentry *root_dentry;
	struct mount *root_mnt;
	__u32 start;
	__u32 off;
	bool done;
};

/* path_walk_init starts a walk at (dentry, vfsmnt) that stops at the task's
 * root, writing from offset off. */
static __always_inline void path_walk_init(struct path_walk *w, struct task_struct *task,
					   struct dentry *dentry, struct vfsmount *vfsmnt, __u32 off)
{
	struct fs_struct *fs = task->fs;
	w->dentry = btf_cast(dentry, struct dentry);
	w->mnt_root = KREAD(btf_cast(vfsmnt, struct vfsmount), mnt_root);
	w->mnt = real_mount(vfsmnt);
	w->root_dentry = NULL;
	w->root_mnt = NULL;
	if (fs) {
		w->root_dentry = KREAD(fs, root.dentry);
		w->root_mnt = real_mount(KREAD(fs, root.mnt));
	}
	w->start = off;
	w->off = off;
	w->done = false;
}

enum path_walk_move {
	/* The walk ends: w->done says whether it reached the root. */
	PATH_WALK_END = 0,
	/* It crossed to the mount point of w->dentry's mount. */
	PATH_WALK_MOUNT = 1,
	/* w->dentry is a component: the caller takes its name and moves
	 * w->dentry to parent. */
	PATH_WALK_NAME = 2,
};

/* path_walk_up decides the step from w->dentry, whose d_parent is parent. */
static __always_inline int path_walk_up(struct path_walk *w, struct dentry *parent)
{
	struct dentry *dentry = w->dentry;
	if (!dentry)
		return PATH_WALK_END;
	if (dentry == w->root_dentry && w->mnt == w->root_mnt) {
		w->done = true;
		return PATH_WALK_END;
	}
	if (dentry != w->mnt_root && dentry != parent)
		return PATH_WALK_NAME;
	if (dentry != w->mnt_root) {
		/* Outside the mount's tree (a lazily unmounted or otherwise
		 * unreachable directory). */
		w->done = true;
		return PATH_WALK_END;
	}
	struct mount *mnt = w->mnt;
	struct mount *mnt_parent = KREAD(mnt, mnt_parent);
	if (!mnt_parent)
		return PATH_WALK_END;
	if (mnt == mnt_parent) {
		w->done = true;
		return PATH_WALK_END;
	}
	w->dentry = KREAD(mnt, mnt_mountpoint);
	w->mnt = mnt_parent;
	w->mnt_root = KREAD(mnt_parent, mnt.mnt_root);
	return PATH_WALK_MOUNT;
}

/* path_walk_step does one step of the walk, writing a component into
 * buf[off & mask] (buf must hold mask + NAME_MAX_LEN bytes). It returns 1
 * when the walk ends (w->done says whether it reached the root rather than
 * running out of room), 0 to go on. At most CWD_MAX bytes are written. */
static __always_inline long path_walk_step(struct path_walk *w, char *buf, __u32 mask)
{
	struct dentry *dentry = w->dentry;
	struct dentry *parent = KREAD(dentry, d_parent);
	int move = path_walk_up(w, parent);
	if (move != PATH_WALK_NAME)
		return move == PATH_WALK_END;
	__u32 off = w->off;
	if (off - w->start > CWD_MAX - NAME_MAX_LEN || off > mask)
		return 1;
	const unsigned char *name = KREAD(dentry, d_name.name);
	__u32 len = KREAD(dentry, d_name.len);
	long n;
	if (HAVE_BTF_CAST && bpf_core_field_exists(dentry->d_shortname) && len < sizeof(dentry->d_shortname) &&
	    (const void *)name == (const void *)&dentry->d_shortname) {
		/* A short name is kept in the dentry itself: five plain
		 * loads instead of a helper call. The NUL is written here,
		 * whatever a concurrent rename left in the copy. */
		__u64 *dst = (__u64 *)&buf[off & mask];
		dst[0] = dentry->d_shortname.words[0];
		dst[1] = dentry->d_shortname.words[1];
		dst[2] = dentry->d_shortname.words[2];
		dst[3] = dentry->d_shortname.words[3];
		dst[4] = dentry->d_shortname.words[4];
		__u64 nul = len;
		/* Keep the bound where the verifier sees it. */
		asm volatile("%[n] &= 63" : [n] "+r"(nul));
		buf[(off & mask) + nul] = 0;
		n = len + 1;
	} else {
		n = bpf_probe_read_kernel_str(&buf[off & mask], NAME_MAX_LEN, name);
		if (n <= 0)
			return 1;
	}
	w->off = off + n;
	w->dentry = parent;
	return 0;
}

#if defined(__TARGET_ARCH_arm64)
/* arm64's struct pt_regs (vmlinux.h is x86's); CO-RE relocates the offsets
 * against the running kernel's. */
struct pt_regs___st_arm64 {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
	__u64 orig_x0;
} __attribute__((preserve_access_index));
#endif

/* syscall_args reads the first five arguments of the task's current syscall
 * from its saved user registers. At sys_exit they are still the arguments
 * the syscall ran with (after any change by ptrace or seccomp at its entry):
 * only the return register has been written, and on arm64 the first
 * argument is kept in orig_x0 for that reason. So a program at sys_exit
 * needs nothing kept from sys_enter. */
static __always_inline void syscall_args(struct task_struct *task, __u64 *x)
{
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
#if defined(__TARGET_ARCH_x86)
	x[0] = r->di;
	x[1] = r->si;
	x[2] = r->dx;
	x[3] = r->r10;
	x[4] = r->r8;
#elif defined(__TARGET_ARCH_arm64)
	struct pt_regs___st_arm64 *u = (void *)r;
	x[0] = u->orig_x0;
	x[1] = u->regs[1];
	x[2] = u->regs[2];
	x[3] = u->regs[3];
	x[4] = u->regs[4];
#else
#error "syscall_args: unsupported architecture"
#endif
}

#endif
