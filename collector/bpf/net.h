/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structs and constants of the network programs (net.c), shared with the Go
 * loader through bpf2go -type. Every network record kind (KIND_NET_CONNECT,
 * KIND_NET_CLOSE, KIND_NET_LISTEN, KIND_NET_ACCEPT) uses struct net_event.
 */
#ifndef SANDTRAIL_NET_H
#define SANDTRAIL_NET_H

/* net_event.op for KIND_NET_CONNECT records. */
enum net_op {
	NET_OP_CONNECT = 1,
	NET_OP_SEND = 2,
};

/* The verdict of the egress policy (net_event.verdict, egress_config). */
enum net_verdict {
	NET_ALLOW = 0,
	NET_BLOCK = 1,
	NET_FLAG = 2,
};

/* net_event.flags. */
enum net_flags {
	/* A port-53 connect or send rewritten to the session's DNS proxy;
	 * the record names the original destination. */
	NET_REDIRECTED = 1,
	/* A connection accepted by a listener (net.close). */
	NET_ACCEPTED = 2,
	/* The DNS proxy had answered with the destination address when the
	 * connect or send was decided (net.connect, net.send): the decision
	 * used its domain, and the event names it. */
	NET_DOMAIN_KNOWN = 4,
};

/* Flags of the CIDR tries (cidr4, cidr6). An entry carries its own flags and
 * those of every shorter prefix that contains it, so the longest match
 * answers "is the address in any blocked / allowed prefix". */
enum cidr_flags {
	CIDR_BLOCKED = 1,
	CIDR_ALLOWED = 2,
	CIDR_DOH = 4, /* a DoH endpoint given by address (a full-length prefix) */
};

/* Flags of the port table (ports), indexed by port. */
enum port_flags {
	PORT_BLOCKED_TCP = 1,
	PORT_BLOCKED_UDP = 2,
	PORT_ALLOWED_TCP = 4,
	PORT_ALLOWED_UDP = 8,
};

/* Classes of learned domains (domains), by address. */
enum domain_class {
	DOMAIN_BLOCKED = 1,
	DOMAIN_DOH = 2,
	DOMAIN_ALLOWED = 4,
};

/* The egress settings (egress_conf[0]). */
struct egress_config {
	__u8 enabled;       /* 0: no egress policy, everything is allowed */
	__u8 def;           /* enum net_verdict of egress.default */
	__u8 doh_action;    /* enum net_verdict of egress.doh_action */
	__u8 allowed_dests; /* allowed domains or CIDRs exist */
	__u8 allowed_ports; /* allowed ports exist */
	__u8 unix_def;      /* enum net_verdict of egress.unix.default */
	__u8 raw_block;     /* egress.raw_sockets: block */
	__u8 _pad;
};

/* An IPv4 or IPv6 address and port: addr[0] holds an IPv4 address; all four
 * words an IPv6 one. Both in network byte order; port in host order. */
struct net_addr {
	__u32 addr[4];
	__u16 port;
	__u16 family; /* AF_INET or AF_INET6 */
};

/* The DNS proxy of a watched cgroup (dns_redirect). A zero family means no
 * proxy for that family. */
struct dns_target {
	struct net_addr v4;
	struct net_addr v6;
};

/* The original destination of a redirected socket (dns_orig), and the proxy
 * address it was sent to, so that replies can be given the original source. */
struct dns_orig {
	struct net_addr orig;
	struct net_addr proxy;
};

/* The task that last connected or sent a redirected DNS socket
 * (dns_senders): the DNS proxy names a query's sender with it. */
struct dns_sender {
	__u32 pid; /* tgid */
	__u32 uid;
	char comm[16];
};

/* Every network record. src is unknown (zero) for connect and send. */
struct net_event {
	struct event_header hdr;
	__u64 cookie;    /* socket cookie */
	__u64 start;     /* when the connection began (close), boot ns */
	__u64 bytes_out; /* close: tcp_sock.bytes_acked */
	__u64 bytes_in;  /* close: tcp_sock.bytes_received */
	__u64 count;     /* send: the datagrams this record stands for */
	__u32 uid;
	__u8 op;       /* enum net_op (connect records) */
	__u8 proto;    /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 verdict;  /* enum net_verdict */
	__u8 flags;    /* enum net_flags */
	struct net_addr src;
	struct net_addr dst;
};

/* The bytes of a sun_path (UNIX_PATH_MAX), and one more for the NUL that a
 * pathname of the full length lacks. */
#define UNIX_NAME_MAX 109

/* The key of the unix allowlist (unix_allow, an LPM trie): the cgroup the
 * entry is for (0: every session) as 8 bytes, then the address: a
 * pathname's bytes up to its NUL and zeros after; an abstract name's NUL
 * and its bytes, then zeros. A pathname entry ends in "/" (everything
 * beneath) or includes its NUL (that path only). */
struct unix_key {
	__u32 prefixlen;
	__u8 data[8 + UNIX_NAME_MAX];
};

/* The value of a unix_allow entry. exact_len, for an abstract name
 * allowed alone, is its length with the leading NUL; 0 for a prefix. */
struct unix_allow_val {
	__u16 exact_len;
	__u16 _pad;
};

/* A connect(2) or an addressed send of a unix socket (KIND_NET_UNIX). */
struct unix_event {
	struct event_header hdr;
	__u64 cookie;
	__u64 count; /* send: the sends this record stands for */
	__u32 uid;
	__u8 op;        /* enum net_op */
	__u8 verdict;   /* enum net_verdict */
	__u8 sock_type; /* SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET */
	__u8 _pad;
	__u32 len; /* bytes of name: the sun_path's (without a pathname's NUL) */
	__u32 _pad2;
	__u8 name[UNIX_NAME_MAX]; /* an abstract name starts with its NUL */
	__u8 _pad3[3];
};

/* A socket(2) of an unusual family or type (KIND_NET_SOCKET): any family
 * but unix, inet, inet6 and netlink, and raw and packet sockets of inet and
 * inet6. */
struct socket_event {
	struct event_header hdr;
	__s64 ret; /* the fd, or -errno */
	__u32 uid;
	__u32 family;
	__u32 type; /* without SOCK_NONBLOCK and SOCK_CLOEXEC */
	__u32 protocol;
	__u8 verdict; /* NET_BLOCK: refused by egress.raw_sockets */
	__u8 _pad[7];
};


/* A UDP socket of a watched cgroup and its traffic (udp_flows, by socket
 * cookie): rate.c's cgroup_skb programs count every datagram's payload,
 * whatever syscall sent it (send, sendto, sendmsg, sendmmsg, write), on a
 * connected socket or not; net.c's sock_release program records the total
 * as net.close when the socket is released. */
struct udp_flow {
	__u64 watched;   /* the watched cgroup of the socket's */
	__u64 start;     /* its first datagram, boot ns */
	__u64 bytes_out; /* UDP payload sent */
	__u64 bytes_in;  /* UDP payload received */
	struct net_addr src;
	struct net_addr dst; /* a connected socket's peer; zero otherwise */
};

#endif
