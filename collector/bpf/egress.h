/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The egress settings map, written by Go (one entry): net.c's, and shared
 * with unix.c (MapReplacements), which decides egress.unix from it.
 */
#ifndef SANDTRAIL_EGRESS_H
#define SANDTRAIL_EGRESS_H

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct egress_config);
} egress_conf SEC(".maps");

#endif
