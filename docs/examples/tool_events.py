"""Post one model call to the sandtrail daemon's tool API, with Python's
standard library only. Run it inside a session (the session is the caller's
own: "self"), or as root outside every session naming one:

    SANDTRAIL_SESSION=sess-7f3a python3 tool_events.py
    python3 tool_events.py '{"kind": "tool.invoke", "tool": {"name": "read_file"}}'

The daemon keeps of "input" and "output" what the policy's tool_io says
(names, summaries, or full I/O sealed to the investigators).
"""
import http.client
import json
import os
import socket
import sys
import urllib.parse

SOCKET = os.environ.get("SANDTRAIL_API_SOCKET", "/run/sandtrail/api.sock")
SESSION = os.environ.get("SANDTRAIL_SESSION", "self")


class UnixConnection(http.client.HTTPConnection):
    """An HTTP connection over the daemon's unix socket."""

    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def post(body):
    conn = UnixConnection(SOCKET)
    path = "/v1/sessions/%s/events" % urllib.parse.quote(SESSION, safe="")
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    if resp.status != 201:
        raise SystemExit("sandtrail: %d: %s" % (resp.status, text))
    return json.loads(text)


# The event to post: the JSON body given as the first argument, else an
# example model call.
body = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {
    "kind": "model.io",
    "model": {"name": "claude-sonnet-4", "tokens": 1834},
    "input": "user: add lodash and use debounce in search.ts",
    "output": "tool_use bash: npm install lodash@^4.17.0",
}
print(json.dumps(post(body)))
