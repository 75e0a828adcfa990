#!/bin/sh
# The demo's agent (scripts/demo.sh runs it in a session, as the session's
# own unprivileged uid, in a copy beside metadata-probe.py and
# docs/examples/tool_events.py; DEMO_INDEX is the loopback fixture
# server's URL). It prints one line per thing it does; the package
# managers' own output goes to logs in its workdir, which the session
# preserves, and is shown only on failure. It does one thing of every kind
# the record holds: installs through the shims, a blocked package, a tool
# call, `curl | sh`, a refused read of /etc/shadow, a write of cloud
# credentials, DNS lookups, a blocked connection, and a subprocess killed
# by the memory limit.
say() { echo "agent: $*"; }
here="${0%/*}"

mkdir -p webapp && cd webapp
echo '{"name":"webapp","version":"1.0.0","private":true}' >package.json
printf 'console.log("left-pad(\\"7\\", 3, \\"0\\") =", require("left-pad")("7", 3, "0"));\n' >index.js

say "npm install left-pad@^1.3.0"
if npm install --no-audit --no-fund --no-update-notifier left-pad@^1.3.0 >npm.log 2>&1; then
	say "  $(node index.js)"
else
	sed 's/^/agent:   npm: /' npm.log
fi

say "pip install sandtrail-demo"
if pip install --disable-pip-version-check --no-input --quiet --target "$HOME/py" sandtrail-demo >pip.log 2>&1; then
	say "  $(PYTHONPATH="$HOME/py" python3 -c 'import sandtrail_demo; print(sandtrail_demo.GREETING)')"
else
	sed 's/^/agent:   pip: /' pip.log
fi

say "npm install event-stream@3.3.6 (on the default policy's blocklist)"
if npm install --no-audit --no-fund --no-update-notifier event-stream@3.3.6 >npm-blocked.log 2>&1; then
	say "  installed: the policy did not refuse it"
else
	say "  npm: $(head -n 1 npm-blocked.log)"
fi

say "connect to the cloud metadata service (the default egress policy blocks it)"
say "  $(python3 "$here/metadata-probe.py" 2>&1)"

say "report a tool call to the tool API (read_file on the filesystem server)"
tool='{"kind": "tool.invoke", "tool": {"name": "read_file", "server": "filesystem", "method": "tools/call",
  "status": "ok", "duration_ms": 3}, "input": "{\"path\": \"index.js\"}", "output": "console.log(...)"}'
say "  recorded: $(python3 "$here/tool_events.py" "$tool" 2>&1)"

say "curl $DEMO_INDEX/install.sh | sh"
curl -fsS "$DEMO_INDEX/install.sh" | sh >install.log 2>&1
say "  $(cat install.log)"

say "cat /etc/shadow (refused: the agent is not root)"
cat /etc/shadow >/dev/null 2>&1 || say "  refused"

say "write ~/.aws/credentials"
mkdir -p "$HOME/.aws" && printf '[default]\naws_access_key_id = demo\n' >"$HOME/.aws/credentials" && say "  written"

say "look up exfil.example and a.exfil.example (the demo's policy blocks the domain)"
getent hosts exfil.example >/dev/null || getent hosts a.exfil.example >/dev/null || say "  neither resolved"

say "allocate 1 GiB in a subprocess (the session's memory limit is 512 MiB)"
python3 -c 'b = bytearray(1 << 30)' 2>/dev/null
status=$?
[ "$status" -eq 137 ] && say "  killed by the kernel's OOM killer (exit $status)" || say "  exit $status"
