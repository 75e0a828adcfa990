//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The refusals of the session seccomp filter (kernel/seccomp):
 * process.denied for each syscall of the filter's list that failed with
 * EPERM in a watched session. A syscall that seccomp fails with
 * SECCOMP_RET_ERRNO skips its sys_enter tracepoint, but its sys_exit
 * tracepoint still fires, with the original syscall number and the errno as
 * the return value; so one program, attached to the sys_exit tracepoint of
 * each listed syscall with the syscall's index as the cookie, sees every
 * refusal. clone and unshare count only with CLONE_NEWUSER (read from the
 * saved registers, syscall_args), since they fail with EPERM for other
 * reasons too. The kernel's own EPERM for a listed syscall (an unprivileged
 * bpf or perf_event_open when the filter allows them) is a refusal as well,
 * and recorded the same way.
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "common.h"
#include "shared.h"
#include "deny.h"

char LICENSE[] SEC("license") = "GPL";

/* Export the types to bpf2go. */
const struct deny_event *unused_deny_event __attribute__((unused));
const enum deny_cookie *unused_deny_cookie __attribute__((unused));

#define EPERM 1
#define CLONE_NEWUSER 0x10000000

SEC("tracepoint/syscalls/sys_exit_deny")
int deny_exit(struct syscall_trace_exit *ctx)
{
	if (ctx->ret != -EPERM)
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	if (cookie & DENY_NEWUSER_ONLY) {
		__u64 x[5];
		syscall_args(task, x);
		if (!(x[0] & CLONE_NEWUSER))
			return 0;
	}
	struct event_header h = {};
	if (!selected(task, &h))
		return 0;
	struct deny_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop(KIND_DENIED, h.watched);
		return 0;
	}
	e->hdr = h;
	fill_header(&e->hdr, KIND_DENIED, task);
	e->uid = BPF_CORE_READ(task, cred, uid.val);
	e->syscall = cookie & DENY_SYSCALL_MASK;
	bpf_ringbuf_submit(e, wakeup());
	return 0;
}
