/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record of deny.c, shared with Go through bpf2go -type.
 */
#ifndef SANDTRAIL_DENY_H
#define SANDTRAIL_DENY_H

/* The attach cookie of deny_exit: the syscall's index in Go's list (the
 * seccomp package's), plus DENY_NEWUSER_ONLY for clone and unshare, which
 * the session filter refuses only with CLONE_NEWUSER in their first
 * argument. */
enum deny_cookie {
	DENY_SYSCALL_MASK = 0xff,
	DENY_NEWUSER_ONLY = 0x100,
	/* The syscall index of a clone3 whose child was made in a new user
	 * namespace and killed (process.c's deny_userns): not a cookie. */
	DENY_SYSCALL_CLONE3 = 0xff,
	/* The same, but the kernel could not queue the SIGKILL (no
	 * bpf_send_signal_task before Linux 6.13, or it failed). */
	DENY_SYSCALL_CLONE3_ALIVE = 0xfe,
};

/* process.denied: a syscall of the session filter's list failed with
 * EPERM. */
struct deny_event {
	struct event_header hdr;
	__u32 uid;
	__u32 syscall; /* the cookie's index */
};

#endif
