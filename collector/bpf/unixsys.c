//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unix connects and sends recorded from syscalls, for kernels without the
 * cgroup unix-socket hooks (before Linux 6.7, unix.c): the exits of
 * connect(2), sendto(2) and sendmsg(2) of watched tasks whose address is a
 * unix one give the same records as the hooks (KIND_NET_UNIX), with verdict
 * allow: the call has happened, and nothing is refused
 * (collector.capabilities says unix_enforce is missing).
 *
 * It is built as the compat build (SANDTRAIL_COMPAT, shared.h): the kernels
 * it is for may lack the kfunc casts.
 */
#define SANDTRAIL_COMPAT 1
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "common.h"
#include "shared.h"
#include "net.h"
#include "unix.h"

#define AF_UNIX 1

char LICENSE[] SEC("license") = "GPL";

/* The syscalls, as the attach cookie of unix_sys_exit. */
enum unix_sys {
	UNIX_SYS_CONNECT = 0,
	UNIX_SYS_SENDTO = 1,
	UNIX_SYS_SENDMSG = 2,
};

/* syscall_arg5 is the sixth argument of the task's current syscall (sendto's
 * addrlen), beside syscall_args' five. */
static __always_inline __u64 syscall_arg5(struct task_struct *task)
{
	struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
#if defined(__TARGET_ARCH_x86)
	return r->r9;
#elif defined(__TARGET_ARCH_arm64)
	return ((struct pt_regs___st_arm64 *)(void *)r)->regs[5];
#endif
}

/* sock_type returns the type of the socket open on the task's fd, 0 when it
 * is not a socket. */
static __always_inline __u8 sock_type(struct task_struct *task, __u32 fd)
{
	struct file *f = task_file(task, fd);
	if (!f)
		return 0;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	if (!sock)
		return 0;
	return BPF_CORE_READ(sock, type);
}

SEC("tracepoint/syscalls/sys_exit_unix")
int unix_sys_exit(struct syscall_trace_exit *ctx)
{
	long ret = ctx->ret;
	/* ERESTARTSYS .. ERESTART_RESTARTBLOCK: the syscall starts again. */
	if (ret <= -512 && ret >= -516)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	__u64 x[5];
	syscall_args(task, x);
	__u64 sys = bpf_get_attach_cookie(ctx);
	const void *addr;
	__u32 len;
	__u8 op = NET_OP_SEND;
	if (sys == UNIX_SYS_CONNECT) {
		addr = (const void *)x[1];
		len = x[2];
		op = NET_OP_CONNECT;
	} else if (sys == UNIX_SYS_SENDTO) {
		addr = (const void *)x[4];
		len = syscall_arg5(task);
	} else {
		struct user_msghdr mh;
		if (bpf_probe_read_user(&mh, sizeof(mh), (const void *)x[1]))
			return 0;
		addr = mh.msg_name;
		len = mh.msg_namelen;
	}
	if (!addr || len <= SUN_PATH_OFF || len > SUN_PATH_OFF + UNIX_PATH_MAX)
		return 0;
	__u16 family = 0;
	if (bpf_probe_read_user(&family, sizeof(family), addr) || family != AF_UNIX)
		return 0;
	__u32 zero = 0;
	struct unix_scratch *s = bpf_map_lookup_elem(&unix_scratch, &zero);
	if (!s)
		return 0;
	struct unix_event *e = &s->e;
	if (!selected(task, &e->hdr))
		return 0;
	len -= SUN_PATH_OFF;
	__builtin_memset(e->name, 0, sizeof(e->name));
	if (bpf_probe_read_user(e->name, len & 127, addr + SUN_PATH_OFF))
		return 0;
	unix_name_end(s, len);
	e->op = op;
	e->verdict = NET_ALLOW;
	e->sock_type = sock_type(task, x[0]);
	/* The socket's address stands for its cookie: repeats of a send are
	 * counted per socket (unix_submit). */
	e->cookie = (__u64)task_file(task, x[0]);
	unix_submit(task, e);
	return 0;
}
