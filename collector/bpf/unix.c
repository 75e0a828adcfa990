//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The unix-socket programs of the sandtrail collector, an object of their
 * own because their attach types are Linux 6.7's: on older kernels the
 * collector loads everything else (collector.capabilities names
 * unix_enforce as missing).
 *
 *  - cgroup/connect_unix, sendmsg_unix: net.connect and net.send of unix
 *    sockets (KIND_NET_UNIX) with the egress.unix allowlist enforced.
 *
 * unixsys.c records the same from syscalls where these hooks are missing.
 * The ring buffer, the drop counters, the watched table and the settings are
 * process.c's (shared.h), and egress_conf is net.c's.
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "common.h"
#include "shared.h"
#include "net.h"
#include "egress.h"
#include "unix.h"

char LICENSE[] SEC("license") = "GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* The unix allowlist: the policy's entries (cgroup 0), the daemon's own
 * sockets (cgroup 0) and each session's (its watched cgroup). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct unix_key);
	__type(value, struct unix_allow_val);
} unix_allow SEC(".maps");



/* unix_allowed reports whether k (whose data after the cgroup holds the
 * address) matches an entry of cgroup's. len is the address's length with
 * an abstract name's leading NUL. */
static __always_inline bool unix_allowed(struct unix_key *k, __u64 cgroup, __u32 len)
{
	k->prefixlen = (8 + UNIX_NAME_MAX) * 8;
	__builtin_memcpy(k->data, &cgroup, 8);
	struct unix_allow_val *v = bpf_map_lookup_elem(&unix_allow, k);
	return v && (v->exact_len == 0 || v->exact_len == len);
}

/* unix_name reads the address of a unix connect or send into s: the name
 * into the record, and the same bytes into the key. It returns false for an
 * address it cannot read (which is then decided by unix.default). */
static __always_inline bool unix_name(struct bpf_sock_addr *ctx, struct unix_scratch *s)
{
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	__u32 len = sa->uaddrlen;
	if (len <= SUN_PATH_OFF || len > SUN_PATH_OFF + UNIX_PATH_MAX)
		return false;
	len -= SUN_PATH_OFF;
	char *path = (char *)sa->uaddr + SUN_PATH_OFF;
	__builtin_memset(s->e.name, 0, sizeof(s->e.name));
	if (bpf_probe_read_kernel(s->e.name, len & 127, path))
		return false;
	unix_name_end(s, len);
	return true;
}

/* unix_matchable reports whether the allowlist may decide a name: an
 * abstract one, or an absolute pathname without a ".." component (which
 * would lead out of an allowed directory). */
static __always_inline bool unix_matchable(const __u8 *n)
{
	if (n[0] == 0)
		return true;
	if (n[0] != '/')
		return false;
	for (__u32 i = 0; i < UNIX_PATH_MAX - 3; i++) {
		if (n[i] == 0)
			break;
		if (n[i] == '/' && n[i + 1] == '.' && n[i + 2] == '.' && (n[i + 3] == '/' || n[i + 3] == 0))
			return false;
	}
	return true;
}

/* unix_addr records a unix connect (NET_OP_CONNECT) or send (NET_OP_SEND)
 * and enforces the unix allowlist. */
static __always_inline int unix_addr(struct bpf_sock_addr *ctx, __u8 op)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	__u32 zero = 0;
	struct unix_scratch *s = bpf_map_lookup_elem(&unix_scratch, &zero);
	if (!s)
		return 1;
	struct unix_event *e = &s->e;
	if (!selected(task, &e->hdr))
		return 1;
	e->op = op;
	e->sock_type = ctx->type;
	e->cookie = bpf_get_socket_cookie(ctx);
	e->verdict = NET_ALLOW;
	struct egress_config *cf = bpf_map_lookup_elem(&egress_conf, &zero);
	bool named = unix_name(ctx, s);
	if (!named)
		e->len = 0;
	if (cf && cf->enabled && cf->unix_def != NET_ALLOW) {
		__u32 len = e->len;
		if (!named || !unix_matchable(e->name) ||
		    !(unix_allowed(&s->k, e->hdr.watched, len) || unix_allowed(&s->k, 0, len)))
			e->verdict = cf->unix_def;
	}
	__u8 verdict = e->verdict;
	unix_submit(task, e);
	return verdict == NET_BLOCK ? 0 : 1;
}

SEC("cgroup/connect_unix")
int net_connect_unix(struct bpf_sock_addr *ctx)
{
	return unix_addr(ctx, NET_OP_CONNECT);
}

SEC("cgroup/sendmsg_unix")
int net_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return unix_addr(ctx, NET_OP_SEND);
}
