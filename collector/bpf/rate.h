/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structs and constants of the network rate limit (rate.c), shared with the
 * Go loader through bpf2go -type.
 */
#ifndef SANDTRAIL_RATE_H
#define SANDTRAIL_RATE_H

/* The directions of a session's traffic, indexes of net_rate.dir. */
enum rate_dir_index {
	RATE_INGRESS = 0,
	RATE_EGRESS = 1,
};

/* One direction's token bucket and counters. */
struct rate_bucket {
	__u64 tokens;  /* bytes that may pass now */
	__u64 last_ns; /* when tokens were last refilled */
	__u64 passed;  /* bytes let through within the rate */
	__u64 over;    /* bytes over the rate: dropped, or passed under warn */
	__u64 over_packets;
};

/* A rate-limited cgroup's limit and buckets (rates, keyed by its id). The Go
 * side writes rate, burst and warn with zero buckets, and reads the
 * counters. */
struct net_rate {
	struct bpf_spin_lock lock;
	__u32 warn;  /* 1: count what is over the rate, drop nothing */
	__u64 rate;  /* bytes per second, each way */
	__u64 burst; /* bucket size in bytes */
	struct rate_bucket dir[2];
};

#endif
