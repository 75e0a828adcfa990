#!/usr/bin/env bash
# demo.sh records a small agent session with `sandtrail run` and shows what a
# security engineer reads afterwards: the timeline (process tree, lifecycle
# and limits, files), what the agent installed (the package table), the
# alerts, that the journal verifies, and the HTML report (written to the
# current directory). `make demo` runs `scripts/deps.sh demo` and
# ./install.sh first. This script then needs root, the installed sandtrail,
# python3 (for the fixture index and the agent's probes), curl, ip
# (iproute2), and the real npm and pip that the agent's shims run, but no
# daemon (when one is running, run hands the session to it, and the demo
# works the same).
#
# The agent (scripts/demo/agent.sh) does one thing of every kind the record
# holds: installs left-pad from the real npm registry and sandtrail-demo
# from a PyPI fixture index, both through the shims and the verifying
# mirror; asks for event-stream@3.3.6, which the default policy's blocklist
# refuses; reports a tool call to the tool API; pipes an "installer" from
# the loopback fixture server into sh (a rule's alert); reads /etc/shadow
# (refused) and writes ~/.aws/credentials (an alert); looks up names the
# demo's policy blocks (answered by the DNS proxy, never sent upstream);
# tries the cloud metadata service, which the default egress policy
# refuses (see "The metadata probe" below); and runs a subprocess that the
# session's memory limit kills. The demo fails, naming it, if the record
# lacks any of these kinds.
#
# Environment: SANDTRAIL (default: sandtrail on PATH); SANDTRAIL_SOCKET, when
# set, names the ingest socket, beside which the tool API's socket is. The
# HTML report is written to the current directory.
set -euo pipefail

ST="${SANDTRAIL:-sandtrail}"

[ "$(id -u)" -eq 0 ] || { echo "demo: must run as root (sessions need cgroups, the collector loads BPF)" >&2; exit 1; }
command -v "$ST" >/dev/null || { echo "demo: $ST is not on PATH; run ./install.sh first" >&2; exit 1; }
command -v python3 >/dev/null || { echo "demo: python3 is not on PATH; run scripts/deps.sh demo first (make demo does)" >&2; exit 1; }
command -v ip >/dev/null || { echo "demo: ip is not on PATH; install iproute2" >&2; exit 1; }

bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'
[ -t 1 ] || { bold='' dim='' off=''; }
step() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$off"; }
show() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; }

# The metadata probe. The agent connects to 169.254.169.254:80 over TCP.
# The session's egress policy refuses it in the kernel: the cgroup connect4
# hook returns EPERM before the connect is routed, so no SYN is made, and
# the collector records a blocked net.connect. So that no packet can leave
# this machine even if that refusal failed, the probe's address has no
# route for the sessions' uids while the demo runs: a blackhole rule for
# them (removed at exit; sessions run under uids of their own, 0x5a000000
# and the 65535 after it, so nothing else on the host is affected), and the
# agent checks with `ip route get`, as itself, that the kernel finds no
# route before it connects. Were the egress refusal gone, the connect would
# fail with EINVAL at the route lookup, still before any packet. (Not a
# network namespace: the session's seccomp filter refuses unshare, and
# moving a session's process into a namespace root made is no agent's
# doing. Not a UDP connect alone, which sends nothing but is not the probe
# an agent makes of an HTTP service.) The uids are the sessions' default
# range (session.DefaultUIDRange); under another, the probe finds a route,
# does not connect, and the demo fails below.
meta=169.254.169.254
meta_rule=(to "$meta/32" uidrange 1509949440-1510014975 blackhole pref 1000)

work="$(mktemp -d /tmp/sandtrail-demo.XXXXXX)"
chmod 0755 "$work"
index_pid="" meta_rule_added=""
cleanup() {
	[ -z "$index_pid" ] || kill "$index_pid" 2>/dev/null || true
	[ -z "$meta_rule_added" ] || ip rule del "${meta_rule[@]}" || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # so that cleanup runs

# An identical rule that exists already (a killed demo's, or a concurrent
# demo's) is left as it is. A concurrent demo that removes its rule first
# leaves this one's probe with a route: the probe then does not connect,
# and the demo fails below, naming the missing record.
if err="$(ip rule add "${meta_rule[@]}" 2>&1)"; then
	meta_rule_added=1
elif [[ "$err" != *"File exists"* ]]; then
	echo "demo: adding the blackhole rule for the metadata probe (ip rule add ${meta_rule[*]}): $err" >&2
	exit 1
fi

# PyPI is out of reach on sandbox build machines: the session's mirror uses
# a small fixture index (scripts/demo/pypi-fixture.py), served on loopback,
# as its PyPI upstream. npm goes to the real registry through the mirror.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
python3 "$(dirname "$0")/demo/pypi-fixture.py" "$port" &
index_pid=$!
for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/simple/sandtrail-demo/')" 2>/dev/null && break; sleep 0.1; done
# The embedded default policy, with the fixture index approved and the
# domain the agent looks up blocked; the config makes the index the
# mirror's PyPI upstream.
"$ST" policy show | sed -e "/^    pypi:\$/a\      - http://127.0.0.1:$port/" -e 's/^  blocked_domains: \[\]$/  blocked_domains: [exfil.example]/' >"$work/policy.yaml"
grep -q 'blocked_domains: \[exfil.example\]' "$work/policy.yaml" || { echo "demo: could not block exfil.example in the default policy" >&2; exit 1; }
{ [ -r /etc/sandtrail/config.yaml ] && cat /etc/sandtrail/config.yaml; printf 'mirror:\n  upstreams:\n    pypi: http://127.0.0.1:%s/simple/\n' "$port"; } >"$work/config.yaml"
export SANDTRAIL_CONFIG="$work/config.yaml"

cp "$(dirname "$0")/demo/agent.sh" "$(dirname "$0")/demo/metadata-probe.py" "$(dirname "$0")/../docs/examples/tool_events.py" "$work/"
export DEMO_INDEX="http://127.0.0.1:$port"
# The tool API's socket is api.sock beside the ingest socket (docs/agents.md).
api_socket="$(dirname "${SANDTRAIL_SOCKET:-/run/sandtrail/ingest.sock}")/api.sock"
chmod 0755 "$work/agent.sh"

id="demo-$(date -u +%Y%m%d-%H%M%S)"
report="$PWD/sandtrail-report-$id.html"

step "1. the agent runs in a recorded session"
echo "sandtrail run runs the agent as an unprivileged uid in cgroups of its own: the kernel"
echo "records what it runs, reads, writes and connects to; npm and pip are the shims, pointed"
echo "at the verifying mirror. The summary (on stderr) follows the agent's own output."
show "$ST" run --session "$id" --policy "$work/policy.yaml" --env "DEMO_INDEX=$DEMO_INDEX" --env "SANDTRAIL_API_SOCKET=$api_socket" --memory 512M --pids 128 --timeout 3m -- /bin/sh "$work/agent.sh"

step "2. what it did: the process tree, the lifecycle and limits, the files"
show "$ST" timeline "$id" --depth 3

step "3. what it installed: the shim's account joined with the mirror's"
show "$ST" packages --session "$id"

step "4. alerts"
show "$ST" alerts --session "$id"

step "5. the journal verifies against its signed checkpoints"
show "$ST" verify

step "6. the report: one page for a browser, one line for CI"
show "$ST" report "$id" --html "$report"

# Every kind of thing the record holds is in this session's, or the demo
# fails naming what is missing.
kinds="$("$ST" query --session "$id" --format jsonl | python3 -c '
import collections, json, sys
c = collections.Counter()
for line in sys.stdin:
    e = json.loads(line)
    c[e["kind"].split(".")[0]] += 1
    c["dns" if e["kind"] == "net.dns" else ""] += 1
    c["blocked connect" if e["kind"] == "net.connect" and e.get("net", {}).get("verdict") == "blocked" else ""] += 1
del c[""]
print(" ".join("%s=%d" % kv for kv in sorted(c.items())))')"
printf '\nrecorded: %s\n' "$kinds"
for want in process file net dns "blocked connect" pkg tool session limit alert; do
	grep -q "\b$want=" <<<"$kinds" || { echo "demo: the session recorded no $want event" >&2; exit 1; }
done

printf '\n%sdone.%s Open %s in a browser. More: %s timeline %s --all; %s query --session %s --format jsonl\n' \
	"$bold" "$off" "$report" "$ST" "$id" "$ST" "$id"
