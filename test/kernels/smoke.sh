#!/bin/sh
echo "kernels: kernel $(uname -r)"
sandtrail keys generate >/dev/null 2>&1
sandtrail run --user nobody -- sh -c 'true; cat /etc/hostname >/dev/null; cat /etc/shadow; echo hi > out.txt; nc -w1 127.0.0.1 9 </dev/null; nslookup example.com 127.0.0.1; ls /tmp' 2>&1 | tail -40
echo "kernels: run exit $?"
sandtrail query --format jsonl | cut -c1-300
sandtrail verify 2>&1 | tail -3
