#!/usr/bin/env bash
# deps.sh installs the Debian packages a make target needs, once.
# Usage: scripts/deps.sh test|demo|kernels|bench|generate
set -euo pipefail

need=()
agent_user=
want() { # want CMD PACKAGE: install PACKAGE unless CMD is on PATH
	command -v "$1" >/dev/null 2>&1 || need+=("$2")
}

# agent_path is the PATH that a session's agent has after the shims'
# directory (launch.SystemPath): where the shims look for the real npm and
# pip. Root's own PATH may begin with the shims themselves (install.sh's
# /etc/profile.d entry), or hold managers the agent cannot reach (pyenv's
# beneath /root).
agent_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

agent_want() { # agent_want CMD PACKAGE: install PACKAGE unless CMD --version runs from agent_path
	PATH="$agent_path" "$1" --version >/dev/null 2>&1 || need+=("$2")
}

# demo: what make demo needs on a Debian machine with Go, beyond the base
# system: python3 with its standard library for demo.sh and its PyPI
# fixture index (scripts/demo/pypi-fixture.py); the real pip and npm that
# the session's shims run for the agent (Debian's python3-pip; npm brings
# nodejs); the CA certificates the mirror needs to reach the npm registry
# over TLS; useradd, with which install.sh creates the agent's user; and
# ip, for demo.sh's blackhole rule and its agent's route check.
demo() {
	python3 -c 'import http.server, urllib.request, zipfile' >/dev/null 2>&1 || need+=(python3)
	agent_want pip python3-pip
	agent_want npm npm
	[ -e /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
	want useradd passwd
	want ip iproute2
	# The agent's `curl | sh` from a loopback server.
	want curl curl
}

# managers: the real package manager of each ecosystem, which the shims'
# tests run: one line for each manager of the ecosystem registry
# (resolver/ecosystem), as a test (resolver's
# TestDepsScriptInstallsEveryManager) checks.
managers() {
	# The mirror's pip test runs Debian's pip (the agent cannot reach pyenv's).
	/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
	want npm npm
	want cargo cargo
	want apt-get apt
}

# kernels: what the kernel matrix (test/kernels) needs: qemu, a static
# busybox for the initramfs, cpio, and xz for trixie's compressed modules.
kernels() {
	want qemu-system-x86_64 qemu-system-x86
	dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
	want cpio cpio
	want xz xz-utils
}

# postgres_server: Debian's PostgreSQL 15 server binaries, which
# record/central/centraltest runs (initdb and postgres in a scratch cluster
# on a loopback port) for the central store's tests, the scale-out test and
# the benchmarks. They are not on PATH (Debian keeps them beneath
# /usr/lib/postgresql/15/bin).
postgres_server() {
	[ -x /usr/lib/postgresql/15/bin/initdb ] && [ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
}

case "${1:-test}" in
test)
	want dpkg dpkg
	want python3 python3
	want node nodejs
	want ip iproute2
	# The lineage tests' `curl -s URL | sh` (collector, test/e2e).
	want curl curl
	managers
	want gpgv gpgv
	# record/report renders the HTML report in headless Chromium.
	want chromium chromium
	# record/sink's syslog tests run a real rsyslogd over TLS (gtls).
	dpkg -s rsyslog >/dev/null 2>&1 || need+=(rsyslog)
	dpkg -s rsyslog-gnutls >/dev/null 2>&1 || need+=(rsyslog-gnutls)
	# The deb mirror checks Debian's archive against this keyring.
	[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
	postgres_server
	kernels
	agent_user=1
	;;
demo)
	demo
	;;
kernels)
	kernels
	;;
bench)
	want hyperfine hyperfine
	want auditctl auditd
	want wrk wrk
	want strace strace
	want nginx nginx-light
	postgres_server
	;;
generate)
	want clang clang
	want llvm-strip llvm
	want bpftool bpftool
	[ -e /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
	;;
*)
	echo "usage: $0 test|demo|kernels|bench|generate" >&2
	exit 2
	;;
esac

# verdaccio installs Verdaccio 6 from the npm registry for the mirror
# benchmarks, once, beneath test/bench/results/ (Verdaccio 6 asks for
# node-fetch@cjs, a tag the npm registry here does not serve: the override
# pins the version it names).
verdaccio() {
	local dir
	dir="$(dirname "$0")/../test/bench/results/verdaccio"
	[ -x "$dir/node_modules/verdaccio/bin/verdaccio" ] && return 0
	mkdir -p "$dir"
	echo '{"name":"bench-verdaccio","version":"1.0.0","private":true,"overrides":{"node-fetch":"2.7.0"}}' >"$dir/package.json"
	echo "deps: installing verdaccio@6 into $dir"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error verdaccio@6)
}

# hold_services keeps the install from starting a system rsyslog:
# Debian's rsyslog enables and starts rsyslog.service, which would begin
# writing the machine's syslog to /var/log (its default config listens on
# no network port, so it could not take the tests' messages: they start
# their own rsyslogd, with their own config and pid file, on loopback ports
# they pick, and kill only that pid). A policy-rc.d that exits 101 is
# Debian's way to say "start nothing now" (invoke-rc.d and
# deb-systemd-invoke honour it); it is there only during the install, and
# only when none was there before (containers often have one). The service
# stays enabled, as on any Debian machine with rsyslog, for the next boot.
# The same holds for the benchmarks' nginx and auditd: a system nginx
# would sit on port 80 for nothing, and a system auditd would hold the
# kernel's audit socket that the exec storm's own auditd registers on; and
# for postgresql-15, whose package would start its main cluster on port
# 5432 (the tests run their own server, as centraltest says).
hold_services() {
	case " ${need[*]} " in *" rsyslog "* | *" nginx-light "* | *" auditd "* | *" postgresql-15 "*) ;; *) return 0 ;; esac
	[ -e /usr/sbin/policy-rc.d ] && return 0
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
}

if [ "${#need[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${need[*]}; run as root or install them with apt-get" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	hold_services
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# The end-to-end tests run sessions as the default agent user, which
# install.sh creates on an installed machine: create it the same way where
# install.sh never ran.
if [ -n "$agent_user" ] && ! id -u sandtrail-agent >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: the user sandtrail-agent is missing; run as root, or run install.sh" >&2
		exit 1
	fi
	useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin sandtrail-agent
	echo "deps: created user sandtrail-agent"
fi
if [ "${1:-test}" = bench ]; then
	verdaccio
fi
