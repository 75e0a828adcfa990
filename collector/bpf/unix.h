/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the two ways of recording unix connects and sends share: unix.c's
 * cgroup hooks (Linux 6.7) and unixsys.c's syscall tracepoints (older
 * kernels). Each object has its own copy of these maps; the collector loads
 * one of the two.
 */
#ifndef SANDTRAIL_UNIX_H
#define SANDTRAIL_UNIX_H

#define UNIX_PATH_MAX 108
#define SUN_PATH_OFF 2 /* offsetof(struct sockaddr_un, sun_path) */

/* Scratch space for one unix record and its lookup key, per CPU (they do
 * not fit on the stack together with the helpers' frames). */
struct unix_scratch {
	struct unix_event e;
	struct unix_key k;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct unix_scratch);
} unix_scratch SEC(".maps");

/* Unix sends already recorded, by socket, verdict and destination: repeats
 * are counted as sends are (sock_addr). */
struct unix_send_key {
	__u64 cookie;
	__u32 verdict;
	__u32 len;
	__u8 name[UNIX_NAME_MAX];
	__u8 _pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct unix_send_key);
	__type(value, __u64);
} unix_sends SEC(".maps");

/* unix_name_end ends the name of s, len bytes read into s->e.name (zeros
 * after them): a pathname at its first NUL. It sets the record's length
 * and copies the name into the allowlist key. */
static __always_inline void unix_name_end(struct unix_scratch *s, __u32 len)
{
	if (s->e.name[0] != 0) {
		/* A pathname ends at its first NUL. */
		for (__u32 i = 0; i < UNIX_PATH_MAX; i++) {
			if (i >= len)
				break;
			if (s->e.name[i] == 0) {
				len = i;
				break;
			}
		}
		for (__u32 i = 0; i < UNIX_NAME_MAX; i++)
			if (i >= len)
				s->e.name[i] = 0;
	}
	s->e.len = len;
	__builtin_memcpy(&s->k.data[8], s->e.name, UNIX_NAME_MAX);
}

/* unix_submit sends the record e of task, whose op, verdict, name, cookie
 * and sock_type are set. A send that repeats one already recorded (same
 * socket, verdict and destination) is counted, and only the 1st, 2nd, 4th,
 * 8th, ... are sent, each with the count it stands for. */
static __always_inline void unix_submit(struct task_struct *task, struct unix_event *e)
{
	e->count = 1;
	if (e->op == NET_OP_SEND) {
		struct unix_send_key k = {.cookie = e->cookie, .verdict = e->verdict, .len = e->len};
		__builtin_memcpy(k.name, e->name, UNIX_NAME_MAX);
		__u64 *n = bpf_map_lookup_elem(&unix_sends, &k);
		if (n) {
			__u64 c = __sync_fetch_and_add(n, 1) + 1;
			if (c & (c - 1))
				return;
			e->count = c / 2;
		} else {
			__u64 one = 1;
			bpf_map_update_elem(&unix_sends, &k, &one, BPF_ANY);
		}
	}
	fill_header(&e->hdr, KIND_NET_UNIX, task);
	e->uid = (__u32)bpf_get_current_uid_gid();
	if (bpf_ringbuf_output(&events, e, sizeof(*e), wakeup()))
		count_drop(KIND_NET_UNIX, e->hdr.watched);
}

#endif
