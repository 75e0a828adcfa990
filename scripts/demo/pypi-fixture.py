#!/usr/bin/env python3
"""Serve the demo's PyPI fixture index on 127.0.0.1:PORT until killed: one
small wheel, sandtrail-demo 1.0, and its PEP 691 JSON simple page, which
names the wheel's sha256, size and upload time (PEP 700; the mirror's
cooldown reads it, and flags a file of unknown age). PyPI itself is out of
reach on sandbox build machines; the demo's mirror uses this index as its
PyPI upstream.

It also serves /install.sh, the harmless "installer" that the demo's agent
pipes from curl into sh (which a detection rule catches).

Usage: pypi-fixture.py PORT"""
import base64, hashlib, http.server, io, json, sys, zipfile

port = int(sys.argv[1])
name, version = "sandtrail_demo", "1.0"
files = {
    f"{name}/__init__.py": 'GREETING = "hello from a package the mirror verified"\n',
    f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: sandtrail-demo\nVersion: {version}\nSummary: sandtrail's demo package\n",
    f"{name}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: sandtrail-demo\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, body in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(body.encode())}")
record.append(f"{name}-{version}.dist-info/RECORD,,")
files[f"{name}-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"

wheel = f"{name}-{version}-py3-none-any.whl"
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    for p, body in files.items():
        z.writestr(zipfile.ZipInfo(p, date_time=(2020, 1, 1, 0, 0, 0)), body)
blob = buf.getvalue()
page = json.dumps({"meta": {"api-version": "1.1"}, "name": "sandtrail-demo", "versions": [version], "files": [
    {"filename": wheel, "url": f"/files/{wheel}", "hashes": {"sha256": hashlib.sha256(blob).hexdigest()},
     "size": len(blob), "upload-time": "2020-01-01T00:00:00.000000Z"}]}).encode()
routes = {
    "/simple/sandtrail-demo/": ("application/vnd.pypi.simple.v1+json", page),
    f"/files/{wheel}": ("application/octet-stream", blob),
    "/install.sh": ("text/x-shellscript", b'echo "installer: nothing installed (a demo)"\n'),
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ctype, body = routes.get(self.path, (None, None))
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
