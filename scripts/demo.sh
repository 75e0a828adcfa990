#!/usr/bin/env bash
# demo.sh records a small agent session with `sandtrail run` and shows what
# sandtrail knows about it. `make demo` runs `scripts/deps.sh demo` and
# ./install.sh first. This script then needs root, the installed sandtrail,
# python3 (for the PyPI fixture index) and the real npm and pip that the
# agent's shims run, but no daemon (when one is running, run hands the
# session to it, and the demo works the same).
#
# Environment: SANDTRAIL (default: sandtrail on PATH).
set -euo pipefail

ST="${SANDTRAIL:-sandtrail}"

[ "$(id -u)" -eq 0 ] || { echo "demo: must run as root (sessions need cgroups, the collector loads BPF)" >&2; exit 1; }
command -v "$ST" >/dev/null || { echo "demo: $ST is not on PATH; run ./install.sh first" >&2; exit 1; }
command -v python3 >/dev/null || { echo "demo: python3 is not on PATH; run scripts/deps.sh demo first (make demo does)" >&2; exit 1; }

bold=$'\e[1m' dim=$'\e[2m' off=$'\e[0m'
[ -t 1 ] || { bold='' dim='' off=''; }
step() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$off"; }
show() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; }

work="$(mktemp -d /tmp/sandtrail-demo.XXXXXX)"
chmod 0755 "$work"
index_pid=""
cleanup() { [ -z "$index_pid" ] || kill "$index_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# PyPI is out of reach on sandbox build machines: the session's mirror uses
# a small fixture index (scripts/demo/pypi-fixture.py), served on loopback,
# as its PyPI upstream. npm goes to the real registry through the mirror.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
python3 "$(dirname "$0")/demo/pypi-fixture.py" "$port" &
index_pid=$!
for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/simple/sandtrail-demo/')" 2>/dev/null && break; sleep 0.1; done
# The embedded default policy, with the fixture index approved; the config
# makes it the mirror's PyPI upstream.
"$ST" policy show | sed "/^    pypi:\$/a\      - http://127.0.0.1:$port/" >"$work/policy.yaml"
{ [ -r /etc/sandtrail/config.yaml ] && cat /etc/sandtrail/config.yaml; printf 'mirror:\n  upstreams:\n    pypi: http://127.0.0.1:%s/simple/\n' "$port"; } >"$work/config.yaml"
export SANDTRAIL_CONFIG="$work/config.yaml"

# The agent: a script the session runs as the unprivileged sandtrail-agent.
agent="$work/agent.sh"
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
echo "agent: installing packages (npm and pip are the sandtrail shims, pointed at the mirror)"
command -v npm pip
mkdir -p webapp && cd webapp && echo '{"name":"webapp","version":"1.0.0"}' >package.json
npm install --no-audit --no-fund --no-update-notifier left-pad@^1.3.0 2>&1 | sed 's/^/agent: npm: /'
pip install --disable-pip-version-check --no-input --target "$HOME/py" sandtrail-demo 2>&1 | sed 's/^/agent: pip: /'
cd ..
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
echo "DNS lookup; its npm and pip installs go through the shims and the verifying mirror."
echo "It prints a summary (on stderr) when it ends."
show "$ST" run --session "$id" --policy "$work/policy.yaml" --memory 512M --pids 128 --timeout 3m -- /bin/sh "$agent"

step "2. the session's process tree and lifecycle"
show "$ST" timeline "$id"

step "3. the session among all sessions"
show "$ST" sessions --session "$id"

step "4. its process events, straight from the index"
show "$ST" query --session "$id" --kind process.

step "5. what it touched: files, network, DNS"
show "$ST" query --session "$id" --kind file.
show "$ST" query --session "$id" --kind net.

step "6. what it installed: one row per package, the shim's account joined with the mirror's"
show "$ST" packages --session "$id"

step "7. the journal verifies against its signed checkpoints"
show "$ST" verify

printf '\n%sdone.%s Try: %s query --session %s --format jsonl | jq .\n' "$bold" "$off" "$ST" "$id"
