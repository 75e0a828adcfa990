#!/usr/bin/env python3
"""The demo agent's metadata probe: one TCP connect to 169.254.169.254:80,
made only when the kernel has no route to that address for this process
(scripts/demo.sh adds a blackhole rule for the sessions' uids), so that no
packet can leave the machine even if the session's egress refusal failed.
It prints how the connect ended: EPERM is the egress policy's refusal,
EINVAL the blackhole's."""
import errno, socket, subprocess

meta = "169.254.169.254"

# `ip route get` resolves with the caller's uid, as the connect will.
try:
    route = subprocess.run(["ip", "route", "get", meta], capture_output=True, text=True)
except OSError as e:
    print(f"not probing: cannot check the route to {meta}: {e}")
    raise SystemExit(0)
if route.returncode == 0:
    print(f"not probing: {meta} has a route ({route.stdout.split(chr(10))[0].strip()}), "
          "so a connect that egress failed to refuse would leave the machine")
    raise SystemExit(0)

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect((meta, 80))
    print("connected: neither the egress policy nor the blackhole refused it")
except OSError as e:
    name = errno.errorcode.get(e.errno, str(e.errno))
    why = {errno.EPERM: "refused by the session's egress policy",
           errno.EINVAL: "not refused by the egress policy; the blackhole rule stopped it"}
    print(f"{name} ({e.strerror}): {why.get(e.errno, 'failed')}")
