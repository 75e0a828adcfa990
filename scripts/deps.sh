#!/usr/bin/env bash
# deps.sh installs the Debian packages a make target needs, once.
# Usage: scripts/deps.sh test|bench|generate
set -euo pipefail

need=()
want() { # want CMD PACKAGE: install PACKAGE unless CMD is on PATH
	command -v "$1" >/dev/null 2>&1 || need+=("$2")
}

case "${1:-test}" in
test)
	want dpkg dpkg
	want python3 python3
	want node nodejs
	want ip iproute2
	want npm npm
	;;
bench)
	want hyperfine hyperfine
	want auditctl auditd
	want wrk wrk
	;;
generate)
	want clang clang
	want llvm-strip llvm
	want bpftool bpftool
	[ -e /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
	;;
*)
	echo "usage: $0 test|bench|generate" >&2
	exit 2
	;;
esac

if [ "${#need[@]}" -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${need[*]}; run as root or install them with apt-get" >&2
	exit 1
fi
echo "deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
