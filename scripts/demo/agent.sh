#!/bin/sh
# The demo's agent (scripts/demo.sh runs it in a session, as the session's
# own unprivileged uid, in a copy beside metadata-probe.py). It prints one
# line per thing it does; the package managers' own output goes to logs in
# its workdir, which the session preserves, and is shown only on failure.
say() { echo "agent: $*"; }
here="$(dirname "$0")"

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
	sed -n "1s/^/agent:   npm: /p" npm-blocked.log
fi

say "connect to the cloud metadata service (the default egress policy blocks it)"
python3 "$here/metadata-probe.py" | sed 's/^/agent:   /'
