package collector

// The BPF objects are generated with clang and committed, so that go build
// needs no clang. Regenerate with `go generate ./collector` (make generate).
// process.c and file.c are built twice: the compat build (SANDTRAIL_COMPAT,
// shared.h) reads kernel memory without the kfunc casts of Linux 6.2, for
// older kernels; it shares the fast build's Go types.
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type event_header -type exec_event -type fork_event -type exit_event -type exec_failed_event -type oom_event -type drop_key -type watch_flags -type event_kind -type exec_flags -type config_key -type limits process bpf/process.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type net_event -type net_addr -type egress_config -type dns_target -type dns_sender -type dns_orig -type net_op -type net_verdict -type net_flags -type cidr_flags -type port_flags -type domain_class -type unix_key -type unix_allow_val -type unix_event -type socket_event net bpf/net.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type file_event -type file_key -type file_sys -type file_op -type file_part -type file_record_flags -type file_verdict -type file_config -type file_reads file bpf/file.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 unix bpf/unix.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 unixsys bpf/unixsys.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type net_rate -type rate_bucket -type rate_dir_index rate bpf/rate.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -type deny_event -type deny_cookie deny bpf/deny.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -DSANDTRAIL_COMPAT" -target amd64,arm64 processCompat bpf/process.c -- -I./bpf
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -DSANDTRAIL_COMPAT" -target amd64,arm64 fileCompat bpf/file.c -- -I./bpf
