//go:build ignore

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The network programs of the sandtrail collector:
 *
 *  - cgroup/connect4, connect6, sendmsg4, sendmsg6: net.connect and net.send
 *    of tasks in watched cgroups, with the egress verdict enforced (a blocked
 *    connect or send returns 0, which the caller sees as EPERM), and the
 *    rewrite of port-53 traffic to the session's DNS proxy;
 *  - cgroup/recvmsg4, recvmsg6, getpeername4, getpeername6: the proxy's
 *    address is turned back into the original DNS server's in replies and
 *    in getpeername;
 *  - tp_btf/inet_sock_set_state: net.listen, net.accept and net.close (with
 *    the bytes of the connection) for TCP;
 *  - cgroup/sock_release: net.close of a UDP socket with the bytes rate.c
 *    counted for it (udp_flows);
 *  - the unix-socket hooks are unix.c's, an object of their own (they need
 *    Linux 6.7);
 *  - cgroup/sock_create and syscalls/sys_exit_socket: net.socket for
 *    socket(2) of unusual families and types, refused ones too, and
 *    egress.raw_sockets: block enforced for raw inet sockets.
 *
 * The ring buffer, the drop counters, the watched table and the settings are
 * process.c's (shared.h).
 */
#include "headers/vmlinux.h"
#include "headers/bpf_helpers.h"
#include "headers/bpf_core_read.h"
#include "headers/bpf_tracing.h"
#include "headers/bpf_endian.h"
#include "common.h"
#include "shared.h"
#include "net.h"
#include "egress.h"

#define AF_INET 2
#define AF_INET6 10
#define DNS_PORT 53

char LICENSE[] SEC("license") = "GPL";

const struct net_event *unused_net_event __attribute__((unused));
const struct egress_config *unused_egress_config __attribute__((unused));
const struct dns_target *unused_dns_target __attribute__((unused));
const struct dns_sender *unused_dns_sender __attribute__((unused));
const enum net_op *unused_net_op __attribute__((unused));
const enum net_verdict *unused_net_verdict __attribute__((unused));
const enum net_flags *unused_net_flags __attribute__((unused));
const enum cidr_flags *unused_cidr_flags __attribute__((unused));
const enum port_flags *unused_port_flags __attribute__((unused));
const enum domain_class *unused_domain_class __attribute__((unused));

/* Failed inserts into the tables below (a connection whose close is then not
 * recorded, a listener whose accepts are not), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} net_drops SEC(".maps");

struct cidr4_key {
	__u32 prefixlen;
	__u32 addr;
};

struct cidr6_key {
	__u32 prefixlen;
	__u32 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cidr4_key);
	__type(value, __u8);
} cidr4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct cidr6_key);
	__type(value, __u8);
} cidr6 SEC(".maps");

/* enum port_flags by port. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} ports SEC(".maps");

/* enum domain_class by address (IPv4 as v4-mapped IPv6), learned from the
 * DNS proxy's answers and expired by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32[4]);
	__type(value, __u8);
} domains SEC(".maps");

/* The DNS proxy of each watched cgroup with a redirect. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct dns_target);
} dns_redirect SEC(".maps");

/* The original DNS server of redirected sockets, in the socket's own
 * storage: freed with the socket, and the recvmsg and getpeername hooks,
 * which run for every socket, find a socket without any at the cost of one
 * pointer read instead of a hash lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct dns_orig);
} dns_originals SEC(".maps");

/* The sender of each redirected socket, by socket cookie: the task of its
 * latest redirected connect or send. The DNS proxy finds a query's socket
 * cookie with sock_diag and the collector reads the sender here
 * (Collector.DNSSender). Written only for port-53 traffic redirected to a
 * proxy; least recently written entries go first. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct dns_sender);
} dns_senders SEC(".maps");

/* A TCP connection whose close is recorded, by socket cookie: the header of
 * the task that made or accepted it. */
struct conn {
	struct event_header hdr;
	__u64 start;
	__u32 uid;
	__u8 flags;
	__u8 _pad[3];
	/* Accepted connections: the local address (the close reads it
	 * again, and takes this when the socket has lost its port). */
	struct net_addr src;
	__u64 cookie; /* listeners: the listening socket */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct conn);
} conns SEC(".maps");

/* Listening sockets of watched tasks, by network namespace and bound
 * address (a zero address for a wildcard bind). */
struct listen_key {
	__u32 netns;
	__u16 port;
	__u16 family;
	__u32 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct listen_key);
	__type(value, struct conn);
} listeners SEC(".maps");

/* The key of each listener in listeners, by socket cookie: a closing socket
 * has lost its port by the time the tracepoint sees it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct listen_key);
} listener_keys SEC(".maps");

/* The number of listener_keys entries per local port: an accept on a port
 * no recorded task listens on ends after this one (inlined) lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} listen_ports SEC(".maps");

/* UDP sends already recorded, by socket and destination: repeats are counted
 * here instead of being recorded again. */
struct send_key {
	__u64 cookie;
	struct net_addr dst;
	__u32 verdict;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct send_key);
	__type(value, __u64);
} sends SEC(".maps");

static __always_inline void count_net_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&net_drops, &zero);
	if (n)
		*n += 1;
}

static __always_inline bool is_mapped(const __u32 *a)
{
	return a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0x0000ffff);
}

/* domain_class returns the class learned for dst's address (keyed by the
 * v4-mapped form of IPv4), and NULL when the DNS proxy has not answered with
 * the address. */
static __always_inline __u8 *domain_class(struct net_addr *dst)
{
	__u32 dkey[4];
	if (dst->family == AF_INET) {
		dkey[0] = 0;
		dkey[1] = 0;
		dkey[2] = bpf_htonl(0x0000ffff);
		dkey[3] = dst->addr[0];
	} else {
		dkey[0] = dst->addr[0];
		dkey[1] = dst->addr[1];
		dkey[2] = dst->addr[2];
		dkey[3] = dst->addr[3];
	}
	return bpf_map_lookup_elem(&domains, dkey);
}

/* egress_verdict decides a connection to dst for proto, in the order of
 * policy.EgressTable. dom is dst's learned domain class (domain_class). */
static __always_inline __u8 egress_verdict(struct net_addr *dst, __u8 proto, __u8 *dom_class)
{
	__u32 zero = 0;
	struct egress_config *cf = bpf_map_lookup_elem(&egress_conf, &zero);
	if (!cf || !cf->enabled)
		return NET_ALLOW;

	__u8 cidr = 0;
	__u8 *v;
	if (dst->family == AF_INET) {
		struct cidr4_key k = {.prefixlen = 32, .addr = dst->addr[0]};
		v = bpf_map_lookup_elem(&cidr4, &k);
		if (v)
			cidr = *v;
	} else {
		struct cidr6_key k = {.prefixlen = 128};
		k.addr[0] = dst->addr[0];
		k.addr[1] = dst->addr[1];
		k.addr[2] = dst->addr[2];
		k.addr[3] = dst->addr[3];
		v = bpf_map_lookup_elem(&cidr6, &k);
		if (v)
			cidr = *v;
	}
	__u8 dom = dom_class ? *dom_class : 0;
	__u32 port = dst->port;
	__u8 pf = 0;
	v = bpf_map_lookup_elem(&ports, &port);
	if (v)
		pf = *v;
	bool tcp = proto == IPPROTO_TCP;

	if (dom & DOMAIN_BLOCKED)
		return NET_BLOCK;
	if (cidr & CIDR_BLOCKED)
		return NET_BLOCK;
	if (pf & (tcp ? PORT_BLOCKED_TCP : PORT_BLOCKED_UDP))
		return NET_BLOCK;
	/* A DoH endpoint on any port but plain DNS's (which the DNS proxy
	 * takes). */
	if (port != DNS_PORT && ((dom & DOMAIN_DOH) || (cidr & CIDR_DOH)))
		return cf->doh_action;
	if (cf->allowed_dests || cf->allowed_ports) {
		bool dest = !cf->allowed_dests || (dom & DOMAIN_ALLOWED) || (cidr & CIDR_ALLOWED);
		bool pok = !cf->allowed_ports || (pf & (tcp ? PORT_ALLOWED_TCP : PORT_ALLOWED_UDP));
		if (dest && pok)
			return NET_ALLOW;
	}
	return cf->def;
}

/* redirect rewrites a port-53 destination of a watched cgroup with a DNS
 * proxy to the proxy, remembering the original by socket cookie. It returns
 * whether it did. v6 is set for the v6 hooks (whose address is user_ip6). */
static __always_inline bool redirect(struct bpf_sock_addr *ctx, struct net_event *e, bool v6)
{
	if (e->dst.port != DNS_PORT || e->hdr.watched == 0)
		return false;
	struct dns_target *t = bpf_map_lookup_elem(&dns_redirect, &e->hdr.watched);
	if (!t)
		return false;
	struct dns_orig o = {};
	o.orig = e->dst;
	if (!v6) {
		if (t->v4.family != AF_INET)
			return false;
		ctx->user_ip4 = t->v4.addr[0];
		ctx->user_port = bpf_htons(t->v4.port);
		o.proxy = t->v4;
	} else if (t->v6.family == AF_INET6 && !(e->dst.family == AF_INET && t->v4.family == AF_INET)) {
		ctx->user_ip6[0] = t->v6.addr[0];
		ctx->user_ip6[1] = t->v6.addr[1];
		ctx->user_ip6[2] = t->v6.addr[2];
		ctx->user_ip6[3] = t->v6.addr[3];
		ctx->user_port = bpf_htons(t->v6.port);
		o.proxy = t->v6;
	} else if (t->v4.family == AF_INET) {
		/* No IPv6 proxy, or a v4-mapped destination: the IPv4 proxy,
		 * v4-mapped (a dual-stack socket reaches it; an IPv6-only one
		 * gets ENETUNREACH). */
		ctx->user_ip6[0] = 0;
		ctx->user_ip6[1] = 0;
		ctx->user_ip6[2] = bpf_htonl(0x0000ffff);
		ctx->user_ip6[3] = t->v4.addr[0];
		ctx->user_port = bpf_htons(t->v4.port);
		o.proxy.family = AF_INET6;
		o.proxy.addr[2] = bpf_htonl(0x0000ffff);
		o.proxy.addr[3] = t->v4.addr[0];
		o.proxy.port = t->v4.port;
	} else {
		return false;
	}
	e->flags |= NET_REDIRECTED;
	struct dns_sender snd = {.pid = bpf_get_current_pid_tgid() >> 32, .uid = (__u32)bpf_get_current_uid_gid()};
	bpf_get_current_comm(snd.comm, sizeof(snd.comm));
	bpf_map_update_elem(&dns_senders, &e->cookie, &snd, BPF_ANY);
	struct bpf_sock *sk = ctx->sk;
	if (sk) {
		struct dns_orig *so = bpf_sk_storage_get(&dns_originals, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (so)
			*so = o;
	}
	return true;
}

/* sock_addr handles connect (op NET_OP_CONNECT) and sendmsg (NET_OP_SEND)
 * of both families: it decides, redirects, records and returns what the
 * hook returns (1 to go on, 0 to fail with EPERM). */
static __always_inline int sock_addr(struct bpf_sock_addr *ctx, __u8 op, bool v6)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct net_event e = {};
	if (!selected(task, &e.hdr))
		return 1;
	__u32 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	e.op = op;
	e.proto = proto;
	e.dst.port = bpf_ntohs(ctx->user_port);
	if (!v6) {
		e.dst.family = AF_INET;
		e.dst.addr[0] = ctx->user_ip4;
	} else {
		__u32 a[4];
		a[0] = ctx->user_ip6[0];
		a[1] = ctx->user_ip6[1];
		a[2] = ctx->user_ip6[2];
		a[3] = ctx->user_ip6[3];
		if (is_mapped(a)) {
			e.dst.family = AF_INET;
			e.dst.addr[0] = a[3];
		} else {
			e.dst.family = AF_INET6;
			e.dst.addr[0] = a[0];
			e.dst.addr[1] = a[1];
			e.dst.addr[2] = a[2];
			e.dst.addr[3] = a[3];
		}
	}
	e.cookie = bpf_get_socket_cookie(ctx);
	if (!redirect(ctx, &e, v6)) {
		__u8 *dom = domain_class(&e.dst);
		if (dom)
			e.flags |= NET_DOMAIN_KNOWN;
		e.verdict = egress_verdict(&e.dst, e.proto, dom);
	}

	e.count = 1;
	if (op == NET_OP_SEND) {
		/* The first send of a socket to a destination is recorded;
		 * repeats are counted, and recorded only when the count
		 * reaches a power of two, standing for the sends since the
		 * last record: a flood of n datagrams is log2(n) records. */
		struct send_key k = {.cookie = e.cookie, .dst = e.dst, .verdict = e.verdict};
		__u64 *n = bpf_map_lookup_elem(&sends, &k);
		if (n) {
			__u64 c = __sync_fetch_and_add(n, 1) + 1;
			if (c & (c - 1))
				return e.verdict == NET_BLOCK ? 0 : 1;
			e.count = c / 2;
		} else {
			__u64 one = 1;
			bpf_map_update_elem(&sends, &k, &one, BPF_ANY);
		}
	}

	fill_header(&e.hdr, KIND_NET_CONNECT, task);
	e.uid = (__u32)bpf_get_current_uid_gid();
	if (bpf_ringbuf_output(&events, &e, sizeof(e), wakeup()))
		count_drop(KIND_NET_CONNECT, e.hdr.watched);
	return e.verdict == NET_BLOCK ? 0 : 1;
}

SEC("cgroup/connect4")
int net_connect4(struct bpf_sock_addr *ctx)
{
	return sock_addr(ctx, NET_OP_CONNECT, false);
}

SEC("cgroup/connect6")
int net_connect6(struct bpf_sock_addr *ctx)
{
	return sock_addr(ctx, NET_OP_CONNECT, true);
}

SEC("cgroup/sendmsg4")
int net_sendmsg4(struct bpf_sock_addr *ctx)
{
	return sock_addr(ctx, NET_OP_SEND, false);
}

SEC("cgroup/sendmsg6")
int net_sendmsg6(struct bpf_sock_addr *ctx)
{
	return sock_addr(ctx, NET_OP_SEND, true);
}

/* unredirect gives a reply from (or the peer of) a redirected socket the
 * original DNS server's address instead of the proxy's. */
static __always_inline int unredirect(struct bpf_sock_addr *ctx, bool v6)
{
	struct bpf_sock *sk = ctx->sk;
	if (!sk)
		return 1;
	struct dns_orig *o = bpf_sk_storage_get(&dns_originals, sk, 0, 0);
	if (!o)
		return 1;
	if (bpf_ntohs(ctx->user_port) != o->proxy.port)
		return 1;
	if (!v6) {
		if (o->proxy.family != AF_INET || o->orig.family != AF_INET || ctx->user_ip4 != o->proxy.addr[0])
			return 1;
		ctx->user_ip4 = o->orig.addr[0];
	} else {
		if (o->proxy.family != AF_INET6)
			return 1;
		if (ctx->user_ip6[0] != o->proxy.addr[0] || ctx->user_ip6[1] != o->proxy.addr[1] ||
		    ctx->user_ip6[2] != o->proxy.addr[2] || ctx->user_ip6[3] != o->proxy.addr[3])
			return 1;
		if (o->orig.family == AF_INET) {
			ctx->user_ip6[0] = 0;
			ctx->user_ip6[1] = 0;
			ctx->user_ip6[2] = bpf_htonl(0x0000ffff);
			ctx->user_ip6[3] = o->orig.addr[0];
		} else {
			ctx->user_ip6[0] = o->orig.addr[0];
			ctx->user_ip6[1] = o->orig.addr[1];
			ctx->user_ip6[2] = o->orig.addr[2];
			ctx->user_ip6[3] = o->orig.addr[3];
		}
	}
	ctx->user_port = bpf_htons(o->orig.port);
	return 1;
}

SEC("cgroup/recvmsg4")
int net_recvmsg4(struct bpf_sock_addr *ctx)
{
	return unredirect(ctx, false);
}

SEC("cgroup/recvmsg6")
int net_recvmsg6(struct bpf_sock_addr *ctx)
{
	return unredirect(ctx, true);
}

SEC("cgroup/getpeername4")
int net_getpeername4(struct bpf_sock_addr *ctx)
{
	return unredirect(ctx, false);
}

SEC("cgroup/getpeername6")
int net_getpeername6(struct bpf_sock_addr *ctx)
{
	return unredirect(ctx, true);
}

/* sock_addrs fills the local (src) and remote (dst) addresses of sk. The
 * tracepoint's sk is a BTF pointer: its fields are read directly (checked
 * loads), without a helper call each. */
static __always_inline void sock_addrs(const struct sock *sk, struct net_event *e)
{
	__u16 family = sk->__sk_common.skc_family;
	e->src.port = sk->__sk_common.skc_num;
	e->dst.port = bpf_ntohs(sk->__sk_common.skc_dport);
	if (family == AF_INET) {
		e->src.family = AF_INET;
		e->dst.family = AF_INET;
		e->src.addr[0] = sk->__sk_common.skc_rcv_saddr;
		e->dst.addr[0] = sk->__sk_common.skc_daddr;
		return;
	}
	__u32 a[4];
	a[0] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[0];
	a[1] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[1];
	a[2] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[2];
	a[3] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[3];
	if (is_mapped(a)) {
		e->src.family = AF_INET;
		e->src.addr[0] = a[3];
	} else {
		e->src.family = AF_INET6;
		__builtin_memcpy(e->src.addr, a, sizeof(a));
	}
	a[0] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[0];
	a[1] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[1];
	a[2] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[2];
	a[3] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[3];
	if (is_mapped(a)) {
		e->dst.family = AF_INET;
		e->dst.addr[0] = a[3];
	} else {
		e->dst.family = AF_INET6;
		__builtin_memcpy(e->dst.addr, a, sizeof(a));
	}
}

/* listen_key_of makes the key of a listener bound to local (as sock_addrs
 * reads it: a v4-mapped address as IPv4). */
static __always_inline void listen_key_of(const struct sock *sk, const struct net_addr *local, struct listen_key *k)
{
	k->netns = sk->__sk_common.skc_net.net->ns.inum;
	k->port = local->port;
	k->family = local->family;
	k->addr[0] = local->addr[0];
	k->addr[1] = local->addr[1];
	k->addr[2] = local->addr[2];
	k->addr[3] = local->addr[3];
}

/* find_listener returns the listener a connection to local was accepted
 * by: one bound to that address, else a wildcard of its family, else (for
 * IPv4) a dual-stack IPv6 wildcard. */
static __always_inline struct conn *find_listener(const struct sock *sk, const struct net_addr *local)
{
	struct listen_key k;
	listen_key_of(sk, local, &k);
	struct conn *l = bpf_map_lookup_elem(&listeners, &k);
	if (l)
		return l;
	k.addr[0] = 0;
	k.addr[1] = 0;
	k.addr[2] = 0;
	k.addr[3] = 0;
	l = bpf_map_lookup_elem(&listeners, &k);
	if (l || k.family != AF_INET)
		return l;
	k.family = AF_INET6;
	return bpf_map_lookup_elem(&listeners, &k);
}

static __always_inline void emit(struct net_event *e, __u32 kind)
{
	e->hdr.kind = kind;
	if (bpf_ringbuf_output(&events, e, sizeof(*e), wakeup()))
		count_drop(kind, e->hdr.watched);
}

/* sock_cookie returns sk's cookie, 0 when it was never asked for (then the
 * socket was never recorded: the hooks and the handlers below ask for it
 * before they record a socket). */
static __always_inline __u64 sock_cookie(const struct sock *sk)
{
	return sk->__sk_common.skc_cookie.counter;
}

/* listen_port_add adds d to the count of listener_keys entries on port. */
static __always_inline void listen_port_add(__u16 port, __s32 d)
{
	__u32 k = port;
	__u32 *n = bpf_map_lookup_elem(&listen_ports, &k);
	if (n)
		__sync_fetch_and_add(n, d);
}

/* on_listen records listen(2), in the listening task's context, and keeps
 * the listener for its accepts. */
static __always_inline int on_listen(const struct sock *sk)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct net_event e = {};
	if (!selected(task, &e.hdr))
		return 0;
	e.proto = IPPROTO_TCP;
	fill_header(&e.hdr, KIND_NET_LISTEN, task);
	e.uid = (__u32)bpf_get_current_uid_gid();
	sock_addrs(sk, &e);
	e.dst.port = 0;
	e.start = e.hdr.ts;
	e.cookie = bpf_get_socket_cookie((void *)sk);
	struct listen_key lk;
	listen_key_of(sk, &e.src, &lk);
	struct conn c = {.hdr = e.hdr, .start = e.hdr.ts, .uid = e.uid, .flags = NET_ACCEPTED, .cookie = e.cookie};
	if (bpf_map_update_elem(&listeners, &lk, &c, BPF_ANY))
		count_net_drop();
	else if (bpf_map_update_elem(&listener_keys, &e.cookie, &lk, BPF_NOEXIST)) {
		bpf_map_delete_elem(&listeners, &lk);
		count_net_drop();
	} else
		listen_port_add(lk.port, 1);
	emit(&e, KIND_NET_LISTEN);
	return 0;
}

/* on_listener_close forgets a closing listener (by cookie). */
static __always_inline int on_listener_close(__u64 cookie)
{
	struct listen_key *k = bpf_map_lookup_elem(&listener_keys, &cookie);
	if (!k)
		return 0;
	struct listen_key lk = *k;
	if (bpf_map_delete_elem(&listener_keys, &cookie))
		return 0;
	listen_port_add(lk.port, -1);
	/* Another socket may have taken the key since (SO_REUSEPORT). */
	struct conn *l = bpf_map_lookup_elem(&listeners, &lk);
	if (l && l->cookie == cookie)
		bpf_map_delete_elem(&listeners, &lk);
	return 0;
}

/* on_connect keeps a connection of a recorded task for its close:
 * connect(2) got past the hooks and routing, in the connecting task's
 * context, and from here on every failure ends in TCP_CLOSE, so the entry
 * cannot be left behind. */
static __always_inline int on_connect(const struct sock *sk)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct conn c = {};
	if (!selected(task, &c.hdr))
		return 0;
	fill_header(&c.hdr, KIND_NET_CLOSE, task);
	c.start = c.hdr.ts;
	c.uid = (__u32)bpf_get_current_uid_gid();
	__u64 cookie = sock_cookie(sk);
	if (!cookie)
		cookie = bpf_get_socket_cookie((void *)sk);
	if (bpf_map_update_elem(&conns, &cookie, &c, BPF_ANY))
		count_net_drop();
	return 0;
}

/* on_accept records a connection to a watched listener as established
 * (usually in softirq), attributed to the listening task. */
static __always_inline int on_accept(const struct sock *sk)
{
	/* Most accepts are not on a port a recorded task listens on: an
	 * array lookup (inlined) ends them. */
	__u32 port = sk->__sk_common.skc_num;
	__u32 *nl = bpf_map_lookup_elem(&listen_ports, &port);
	if (!nl || !*nl)
		return 0;
	struct net_event e = {};
	e.proto = IPPROTO_TCP;
	sock_addrs(sk, &e);
	struct conn *l = find_listener(sk, &e.src);
	if (!l)
		return 0;
	struct conn c = *l;
	c.cookie = 0;
	c.hdr.ts = bpf_ktime_get_boot_ns();
	c.start = c.hdr.ts;
	e.hdr = c.hdr;
	e.uid = c.uid;
	e.start = c.start;
	e.flags = NET_ACCEPTED;
	e.cookie = bpf_get_socket_cookie((void *)sk);
	c.src = e.src;
	if (bpf_map_update_elem(&conns, &e.cookie, &c, BPF_ANY))
		count_net_drop();
	emit(&e, KIND_NET_ACCEPT);
	return 0;
}

/* on_close records the close of a recorded connection (c, by cookie);
 * oldstate is the state it leaves. */
static __always_inline int on_close(const struct sock *sk, struct conn *c, __u64 cookie, int oldstate)
{
	struct net_event e = {};
	e.proto = IPPROTO_TCP;
	struct net_addr src = c->src;
	e.hdr = c->hdr;
	e.hdr.ts = bpf_ktime_get_boot_ns();
	e.uid = c->uid;
	e.start = c->start;
	e.flags = c->flags;
	e.cookie = cookie;
	bpf_map_delete_elem(&conns, &cookie);
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	sock_addrs(sk, &e);
	if (tp) {
		e.bytes_out = tp->bytes_acked;
		e.bytes_in = tp->bytes_received;
		/* The socket has given its port back (skc_num is 0) by
		 * now, but inet_sport keeps it; a connection never
		 * established (refused, reset, timed out) has no source. */
		if (e.src.port == 0 && oldstate != TCP_SYN_SENT)
			e.src.port = bpf_ntohs(tp->inet_conn.icsk_inet.inet_sport);
	}
	if (e.src.port == 0)
		e.src = src;
	emit(&e, KIND_NET_CLOSE);
	return 0;
}

/* net_sock_state runs for every TCP state change of every socket on the
 * host, so the common case, a socket that is not recorded, must end after
 * the cheapest test: the transition (registers), then for the few acted on
 * one direct field read and at most one lookup (the socket's cookie in
 * conns or listener_keys, or its port in listen_ports) before anything
 * else. Only →SYN_SENT and →LISTEN, in the task that connects or listens,
 * walk the task's cgroups. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(net_sock_state, const struct sock *sk, const int oldstate, const int newstate)
{
	switch (newstate) {
	case TCP_SYN_SENT:
		if (oldstate != TCP_CLOSE)
			return 0;
		break;
	case TCP_ESTABLISHED:
		/* An outgoing connection's local port is read at its close
		 * (inet_sport): only accepts matter here. */
		if (oldstate != TCP_SYN_RECV)
			return 0;
		break;
	case TCP_LISTEN:
	case TCP_CLOSE:
		break;
	default:
		return 0;
	}
	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	if (newstate == TCP_LISTEN)
		return on_listen(sk);
	if (newstate == TCP_SYN_SENT)
		return on_connect(sk);
	if (newstate == TCP_ESTABLISHED)
		return on_accept(sk);
	/* → CLOSE. */
	__u64 cookie = sock_cookie(sk);
	if (!cookie)
		return 0;
	if (oldstate == TCP_LISTEN)
		return on_listener_close(cookie);
	struct conn *c = bpf_map_lookup_elem(&conns, &cookie);
	if (!c)
		return 0;
	return on_close(sk, c, cookie, oldstate);
}

/* ---- UDP flows ---- */

/* The UDP sockets of watched cgroups and their traffic, by cookie: written
 * by rate.c's cgroup_skb programs (shared by the loader), recorded and
 * removed here at release. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct udp_flow);
} udp_flows SEC(".maps");

/* net_sock_release records, when a UDP socket that carried datagrams of a
 * watched cgroup is released, its total payload each way as net.close. */
SEC("cgroup/sock_release")
int net_sock_release(struct bpf_sock *ctx)
{
	if (ctx->protocol != IPPROTO_UDP)
		return 1;
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct udp_flow *f = bpf_map_lookup_elem(&udp_flows, &cookie);
	if (!f)
		return 1;
	struct net_event e = {};
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	selected(task, &e.hdr);
	fill_header(&e.hdr, KIND_NET_CLOSE, task);
	/* The socket's session, whoever releases it. */
	e.hdr.watched = f->watched;
	e.proto = IPPROTO_UDP;
	e.cookie = cookie;
	e.uid = (__u32)bpf_get_current_uid_gid();
	e.start = f->start;
	e.bytes_out = f->bytes_out;
	e.bytes_in = f->bytes_in;
	e.src = f->src;
	e.dst = f->dst;
	bpf_map_delete_elem(&udp_flows, &cookie);
	emit(&e, KIND_NET_CLOSE);
	return 1;
}

/* ---- socket creation ---- */

#define AF_UNIX 1
#define AF_NETLINK 16
#define SOCK_RAW 3
#define SOCK_PACKET 10
#define SOCK_TYPE_MASK 0xf

const struct unix_key *unused_unix_key __attribute__((unused));
const struct unix_allow_val *unused_unix_allow_val __attribute__((unused));
const struct unix_event *unused_unix_event __attribute__((unused));
const struct socket_event *unused_socket_event __attribute__((unused));

/* Sockets refused by the sock_create hook, by the creating thread
 * (pid_tgid), for the socket(2) exit that records them. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} socket_refused SEC(".maps");

#define IPPROTO_ICMP 1
#define IPPROTO_ICMPV6 58

/* ping_socket reports whether socket(family, type, protocol) is an ICMP
 * echo ("ping") socket, which unprivileged users may open where
 * net.ipv4.ping_group_range allows it, and whose sends to an address pass
 * no cgroup sendmsg hook (ping_v4_sendmsg runs none): the egress policy
 * never sees them. */
static __always_inline bool ping_socket(__u32 family, __u32 type, __u32 protocol)
{
	return type == SOCK_DGRAM && ((family == AF_INET && protocol == IPPROTO_ICMP) ||
				      (family == AF_INET6 && protocol == IPPROTO_ICMPV6));
}

/* raw_socket reports whether socket(family, type, protocol) is one that
 * egress.raw_sockets refuses: a raw socket of inet or inet6, or a ping
 * socket. */
static __always_inline bool raw_socket(__u32 family, __u32 type, __u32 protocol)
{
	return ((family == AF_INET || family == AF_INET6) && (type == SOCK_RAW || type == SOCK_PACKET)) ||
	       ping_socket(family, type, protocol);
}

/* net_sock_create refuses, under egress.raw_sockets: block, the raw
 * sockets of watched tasks; the socket(2) exit records them as blocked.
 * The kernel runs it for inet and inet6 sockets only (inet_create,
 * inet6_create), after its own CAP_NET_RAW check: a packet socket is
 * recorded but cannot be refused here. */
SEC("cgroup/sock_create")
int net_sock_create(struct bpf_sock *ctx)
{
	__u32 zero = 0;
	struct egress_config *cf = bpf_map_lookup_elem(&egress_conf, &zero);
	if (!cf || !cf->enabled || !cf->raw_block)
		return 1;
	if (!raw_socket(ctx->family, ctx->type, ctx->protocol))
		return 1;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct event_header h = {};
	if (!selected(task, &h))
		return 1;
	__u64 id = bpf_get_current_pid_tgid();
	__u8 one = 1;
	bpf_map_update_elem(&socket_refused, &id, &one, BPF_ANY);
	return 0;
}

/* unusual_socket reports whether socket(family, type, protocol) is
 * recorded: a family but unix, inet, inet6 and netlink, or a raw, packet or
 * ping socket of inet and inet6. */
static __always_inline bool unusual_socket(__u32 family, __u32 type, __u32 protocol)
{
	switch (family) {
	case AF_UNIX:
	case AF_NETLINK:
		return false;
	case AF_INET:
	case AF_INET6:
		return type == SOCK_RAW || type == SOCK_PACKET || ping_socket(family, type, protocol);
	}
	return true;
}

/* net_socket_exit records socket(2) of an unusual family or type by a
 * watched task, whether it succeeded or not (an unprivileged raw socket
 * fails with EPERM before any socket hook). */
SEC("tracepoint/syscalls/sys_exit_socket")
int net_socket_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	__u64 x[5];
	syscall_args(task, x);
	__u32 family = x[0];
	__u32 type = x[1] & SOCK_TYPE_MASK;
	if (!unusual_socket(family, type, x[2]))
		return 0;
	struct socket_event e = {};
	if (!selected(task, &e.hdr))
		return 0;
	e.family = family;
	e.type = type;
	e.protocol = x[2];
	e.ret = ctx->ret;
	__u64 id = bpf_get_current_pid_tgid();
	if (bpf_map_lookup_elem(&socket_refused, &id)) {
		bpf_map_delete_elem(&socket_refused, &id);
		e.verdict = NET_BLOCK;
	}
	fill_header(&e.hdr, KIND_NET_SOCKET, task);
	e.uid = (__u32)bpf_get_current_uid_gid();
	if (bpf_ringbuf_output(&events, &e, sizeof(e), wakeup()))
		count_drop(KIND_NET_SOCKET, e.hdr.watched);
	return 0;
}
