#!/usr/bin/env bash
# demo.sh records a small agent session with `sandtrail run` and shows what
# sandtrail knows about it. `make demo` runs ./install.sh first; this script
# then needs only root and the installed sandtrail: no daemon (when one is
# running, run hands the session to it, and the demo works the same).
#
# Environment: SANDTRAIL (default: sandtrail on PATH).
set -euo pipefail

ST="${SANDTRAIL:-sandtrail}"

[ "$(id -u)" -eq 0 ] || { echo "demo: must run as root (sessions need cgroups, the collector loads BPF)" >&2; exit 1; }
command -v "$ST" >/dev/null || { echo "demo: $ST is not on PATH; run ./install.sh first" >&2; exit 1; }

bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'
[ -t 1 ] || { bold='' dim='' off=''; }
step() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$off"; }
show() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; }

# The agent: a script the session runs as the unprivileged sandtrail-agent.
agent="$(mktemp /tmp/sandtrail-demo-agent.XXXXXX)"
trap 'rm -f "$agent"' EXIT
cat >"$agent" <<'AGENT'
#!/bin/sh
echo "agent: where am I?";           pwd; id
echo "agent: listing files";         ls /etc | head -n 5
echo "agent: reading /etc/passwd";   wc -l </etc/passwd
echo "agent: writing a small project"
mkdir -p project && cd project
printf 'print("hello from the agent")\n' >main.py
ls -l
echo "agent: asking the system";     uname -sr; date -u +%FT%TZ
echo "agent: looking up the npm registry"
getent hosts registry.npmjs.org || echo "agent: lookup failed"
echo "agent: trying /etc/shadow";    cat /etc/shadow >/dev/null 2>&1 || echo "agent: denied, as expected"
echo "agent: trying the cloud metadata service (the default policy blocks it)"
# From a network namespace of its own, which has no route out, so that the
# demo sends no packet off this machine even if the block failed. The
# session's egress hooks belong to its cgroup and apply there too.
if unshare -rn true 2>/dev/null; then
	unshare -rn bash -c 'exec 3<>/dev/tcp/169.254.169.254/80' 2>&1 | sed 's/^/agent: /' || true
else
	echo "agent: (skipped: no unprivileged network namespace here)"
fi
echo "agent: done"
AGENT
chmod 0755 "$agent"

id="demo-$(date -u +%Y%m%d-%H%M%S)"

step "1. run the agent in a recorded session"
echo "sandtrail run creates session $id, runs the agent inside its own cgroups as"
echo "sandtrail-agent, records from the kernel every exec, fork and exit, sensitive file"
echo "reads and every write, each connection (blocking what the policy forbids) and every"
echo "DNS lookup, and prints a summary (on stderr) when it ends."
show "$ST" run --session "$id" --memory 256M --pids 64 --timeout 2m -- /bin/sh "$agent"

step "2. the session's process tree and lifecycle"
show "$ST" timeline "$id"

step "3. the session among all sessions"
show "$ST" sessions --session "$id"

step "4. its process events, straight from the index"
show "$ST" query --session "$id" --kind process.

step "5. what it touched: files, network, DNS"
show "$ST" query --session "$id" --kind file.
show "$ST" query --session "$id" --kind net.

step "6. the journal verifies against its signed checkpoints"
show "$ST" verify

printf '\n%sdone.%s Try: %s query --session %s --format jsonl | jq .\n' "$bold" "$off" "$ST" "$id"
