#!/usr/bin/env bash
# fetch.sh downloads Debian's cloud kernel of each suite named (bullseye,
# bookworm, trixie) into the cache directory, without touching the system's
# apt state: a scratch sources.list, lists and cache beneath the cache
# directory. For each suite it leaves DIR/SUITE/vmlinuz, DIR/SUITE/release and
# DIR/SUITE/modules/ (the modules a smoke boot loads, decompressed).
# Usage: fetch.sh CACHE_DIR SUITE...
set -euo pipefail

dir="$1"
shift
mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
cat >"$dir/apt/sources.list" <<SOURCES
deb http://deb.debian.org/debian bullseye main
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian trixie main
SOURCES
apt_opts=(
	-o "Dir::Etc::SourceList=$dir/apt/sources.list"
	-o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$dir/apt/lists"
	-o "Dir::Cache=$dir/apt/cache"
	-o Debug::NoLocking=1
	-o APT::Sandbox::User=root
)

# The modules a session needs that Debian builds as modules: overlay (the
# session's private /tmp), and the socket-diag family (the mirror and the
# ingest socket find a peer's cgroup with sock_diag).
modules=(fs/overlayfs/overlay net/ipv4/inet_diag net/ipv4/tcp_diag net/ipv4/udp_diag net/unix/unix_diag)

updated=
for suite in "$@"; do
	out="$dir/$suite"
	if [ -s "$out/vmlinuz" ] && [ -s "$out/release" ]; then
		continue
	fi
	if [ -z "$updated" ]; then
		apt-get "${apt_opts[@]}" -qq update
		updated=1
	fi
	work="$(mktemp -d)"
	(
		cd "$work"
		apt-get "${apt_opts[@]}" -qq download "linux-image-cloud-amd64/$suite" 2>/dev/null
		image="$(dpkg-deb -f linux-image-cloud-amd64_*.deb Depends | sed 's/ (.*//; s/,.*//')"
		apt-get "${apt_opts[@]}" -qq download "$image" 2>/dev/null
		dpkg-deb -x "$image"_*.deb root
	)
	rm -rf "$out"
	mkdir -p "$out/modules"
	moddir=
	for d in "$work"/root/lib/modules/* "$work"/root/usr/lib/modules/*; do
		[ -d "$d" ] && moddir="$d"
	done
	release="$(basename "$moddir")"
	cp "$work/root/boot/vmlinuz-$release" "$out/vmlinuz"
	cp "$work/root/boot/config-$release" "$out/config"
	for m in "${modules[@]}"; do
		f="$(echo "$moddir/kernel/$m".ko*)"
		case "$f" in
		*.xz) xz -dc "$f" >"$out/modules/$(basename "$m").ko" ;;
		*.zst) zstd -qdc "$f" >"$out/modules/$(basename "$m").ko" ;;
		*) cp "$f" "$out/modules/$(basename "$m").ko" ;;
		esac
	done
	echo "$release" >"$out/release"
	rm -rf "$work"
	echo "kernels: fetched $suite ($release)"
done
