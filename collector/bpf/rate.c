//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The network rate limit of the sandtrail collector: cgroup_skb/ingress and
 * cgroup_skb/egress, attached at the collector's cgroup next to the socket
 * hooks of net.c, keep a token bucket per direction for each rate-limited
 * cgroup (rates). A packet of a socket in such a cgroup, or in a cgroup
 * nested up to CGROUP_MAX_NEST levels beneath it, takes its length from the
 * bucket of its direction; a packet the bucket cannot pay for is over the
 * rate. Over the rate, a throttled ingress packet is dropped (TCP
 * retransmits it, which paces the sender), a throttled egress packet is
 * dropped with a congestion notification (TCP reduces its window, as for a
 * local qdisc drop), and under warn everything passes and is only counted.
 * Loopback has no qdisc that honours departure times, so packets are not
 * paced by skb->tstamp.
 *
 * The same programs count the UDP payload of every socket of a watched
 * cgroup (udp_flows, struct udp_flow in net.h), which net.c records as
 * net.close when the socket is released.
 *
 * These programs use no ring buffer: the Go side reads the counters.
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "common.h"
#include "rate.h"
#include "net.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_UDP 17

char LICENSE[] SEC("license") = "GPL";

const struct net_rate *unused_net_rate __attribute__((unused));
const enum rate_dir_index *unused_rate_dir_index __attribute__((unused));

#define NSEC_PER_SEC 1000000000ULL
/* Deeper than any cgroup hierarchy (the kernel's own limit is INT_MAX but
 * systemd and the session layout stay far below). */
#define CGROUP_LEVEL_MAX 64

/* The rate-limited cgroups. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct net_rate);
} rates SEC(".maps");

/* The rate-limited cgroup (0: none) of a socket's cgroup, found once by the
 * walk up and then remembered: cgroup ids are not reused, and the Go side
 * removes the 0 entries when it sets a rate. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} rate_owner SEC(".maps");

/* The watched cgroups: process.c's table (shared.h), shared with this
 * object by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} watched SEC(".maps");

/* The UDP sockets of watched cgroups, by cookie: net.c's, shared with this
 * object by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct udp_flow);
} udp_flows SEC(".maps");

/* nearest_in walks up from the skb's socket's cgroup (id) to the nearest
 * cgroup, itself or up to CGROUP_MAX_NEST levels above it, that is a key of
 * map (rates, watched); 0 for none. */
static __always_inline __u64 nearest_in(struct __sk_buff *skb, __u64 id, void *map)
{
	int level = -1;
	for (int i = 0; i < CGROUP_LEVEL_MAX; i++) {
		__u64 anc = bpf_skb_ancestor_cgroup_id(skb, i);
		if (anc == id) {
			level = i;
			break;
		}
		if (!anc)
			break;
	}
	for (int j = 0; j < CGROUP_MAX_NEST; j++) {
		if (level - j < 0)
			break;
		__u64 anc = bpf_skb_ancestor_cgroup_id(skb, level - j);
		if (anc && bpf_map_lookup_elem(map, &anc))
			return anc;
	}
	return 0;
}

/* ip4_packet reports whether skb is an IPv4 packet (else IPv6). */
static __always_inline bool ip4_packet(struct __sk_buff *skb)
{
	return skb->protocol == __builtin_bswap16(0x0800); /* ETH_P_IP */
}

/* flow_addr fills a of family from a bpf_sock's address words and port. */
static __always_inline void flow_addr(struct net_addr *a, __u32 family, __u32 ip4, const __u32 *ip6, __u16 port)
{
	a->port = port;
	if (family == AF_INET) {
		a->family = AF_INET;
		a->addr[0] = ip4;
		return;
	}
	a->family = AF_INET6;
	a->addr[0] = ip6[0];
	a->addr[1] = ip6[1];
	a->addr[2] = ip6[2];
	a->addr[3] = ip6[3];
}

/* count_udp adds the UDP payload of skb to its socket's flow, creating it
 * on a watched socket's first datagram. The payload is the packet less an
 * IP header without options and the UDP header. */
static __always_inline void count_udp(struct __sk_buff *skb, int dir)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return;
	sk = bpf_sk_fullsock(sk);
	if (!sk || sk->protocol != IPPROTO_UDP)
		return;
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct udp_flow *f = bpf_map_lookup_elem(&udp_flows, &cookie);
	if (!f) {
		__u64 id = bpf_skb_cgroup_id(skb);
		__u64 w = id ? nearest_in(skb, id, &watched) : 0;
		if (!w)
			return;
		struct udp_flow n = {.watched = w, .start = bpf_ktime_get_boot_ns()};
		/* The packet's family: a v6 socket sends IPv4 to a v4-mapped
		 * peer, with its v4 addresses in the v4 fields. */
		__u32 family = ip4_packet(skb) ? AF_INET : AF_INET6;
		/* An unbound socket's address is the packet's (the packet's
		 * local end either way). */
		/* An unbound socket's local address is the packet's: its
		 * source going out, its destination coming in (the IP header,
		 * where a cgroup_skb program's data starts). */
		__u32 src4 = sk->src_ip4;
		__u32 src6[4] = {sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2], sk->src_ip6[3]};
		bool out = dir == RATE_EGRESS;
		if (family == AF_INET && !src4)
			bpf_skb_load_bytes(skb, out ? 12 : 16, &src4, 4);
		if (family == AF_INET6 && !(src6[0] | src6[1] | src6[2] | src6[3]))
			bpf_skb_load_bytes(skb, out ? 8 : 24, src6, 16);
		__u32 dst6[4] = {sk->dst_ip6[0], sk->dst_ip6[1], sk->dst_ip6[2], sk->dst_ip6[3]};
		flow_addr(&n.src, family, src4, src6, sk->src_port);
		if (sk->dst_port)
			flow_addr(&n.dst, family, sk->dst_ip4, dst6, __builtin_bswap16((__u16)sk->dst_port));
		bpf_map_update_elem(&udp_flows, &cookie, &n, BPF_NOEXIST);
		f = bpf_map_lookup_elem(&udp_flows, &cookie);
		if (!f)
			return;
	}
	__u64 hdr = (ip4_packet(skb) ? 20 : 40) + 8;
	__u64 len = skb->len > hdr ? skb->len - hdr : 0;
	if (dir == RATE_EGRESS)
		__sync_fetch_and_add(&f->bytes_out, len);
	else
		__sync_fetch_and_add(&f->bytes_in, len);
}

static __always_inline struct net_rate *rate_of(struct __sk_buff *skb)
{
	__u64 id = bpf_skb_cgroup_id(skb);
	if (!id)
		return 0;
	__u64 *owner = bpf_map_lookup_elem(&rate_owner, &id);
	__u64 lim;
	if (owner) {
		lim = *owner;
	} else {
		lim = nearest_in(skb, id, &rates);
		bpf_map_update_elem(&rate_owner, &id, &lim, BPF_ANY);
	}
	if (!lim)
		return 0;
	return bpf_map_lookup_elem(&rates, &lim);
}

/* take refills b for the time since its last packet and takes len bytes
 * from it. It returns false when the bucket cannot pay: then nothing is
 * taken. A full bucket pays for a packet larger than itself, so that no
 * packet size starves. */
static __always_inline bool take(struct rate_bucket *b, __u64 rate, __u64 burst, __u64 len, __u64 now)
{
	if (b->last_ns == 0) {
		b->tokens = burst;
		b->last_ns = now;
	} else if (now > b->last_ns) {
		/* now was read before the lock: another CPU's packet may have
		 * moved last_ns past it, and then nothing is refilled. */
		__u64 elapsed = now - b->last_ns;
		/* The time that fills an empty bucket: a longer pause fills it,
		 * a shorter one earns rate bytes a second (not the whole burst,
		 * or a sender pausing between bursts would get a burst a pause
		 * whatever the rate). elapsed * rate stays below burst * 10^9. */
		__u64 fill = burst * NSEC_PER_SEC / rate;
		if (elapsed >= fill) {
			b->tokens = burst;
		} else {
			__u64 t = b->tokens + elapsed * rate / NSEC_PER_SEC;
			b->tokens = t < burst ? t : burst;
		}
		b->last_ns = now;
	}
	if (b->tokens >= len) {
		b->tokens -= len;
		return true;
	}
	if (b->tokens == burst) {
		b->tokens = 0;
		return true;
	}
	return false;
}

/* limit returns whether the packet is over its cgroup's rate and may not
 * pass (under warn it always may). */
static __always_inline bool over_limit(struct __sk_buff *skb, int dir)
{
	struct net_rate *r = rate_of(skb);
	if (!r)
		return false;
	__u64 len = skb->len;
	__u64 now = bpf_ktime_get_ns();
	bool drop = false;
	bpf_spin_lock(&r->lock);
	struct rate_bucket *b = &r->dir[dir & 1];
	if (take(b, r->rate, r->burst, len, now)) {
		b->passed += len;
	} else {
		b->over += len;
		b->over_packets++;
		drop = !r->warn;
		if (r->warn)
			b->tokens = 0;
	}
	bpf_spin_unlock(&r->lock);
	return drop;
}

SEC("cgroup_skb/ingress")
int rate_ingress(struct __sk_buff *skb)
{
	if (over_limit(skb, RATE_INGRESS))
		return 0;
	count_udp(skb, RATE_INGRESS);
	return 1;
}

/* 2 is "drop, and notify congestion": TCP enters CWR. */
SEC("cgroup_skb/egress")
int rate_egress(struct __sk_buff *skb)
{
	if (over_limit(skb, RATE_EGRESS))
		return 2;
	count_udp(skb, RATE_EGRESS);
	return 1;
}
