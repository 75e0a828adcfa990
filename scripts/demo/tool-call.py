#!/usr/bin/env python3
"""Report one tool invocation to sandtrail's tool API, as an agent's
framework does for each tool it calls (the demo's agent runs it in its
session: the session is the caller's own, "self"). The daemon keeps of the
input and output what the policy's tool_io says. With the standard library
only; docs/examples/tool_events.py is the documented example."""
import http.client, json, os, socket, sys

SOCKET = os.environ.get("SANDTRAIL_API_SOCKET", "/run/sandtrail/api.sock")


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


body = {"kind": "tool.invoke", "tool": {"name": "read_file", "server": "filesystem", "method": "tools/call",
                                        "status": "ok", "duration_ms": 3},
        "input": json.dumps({"path": "index.js"}), "output": open("index.js").read()}
conn = UnixConnection(SOCKET)
conn.request("POST", "/v1/sessions/self/events", json.dumps(body), {"Content-Type": "application/json"})
resp = conn.getresponse()
text = resp.read().decode()
if resp.status != 201:
    sys.exit("tool API: %d: %s" % (resp.status, text))
print("recorded tool.invoke read_file (seq %s)" % json.loads(text).get("seq", "?"))
