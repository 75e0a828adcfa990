#!/bin/sh
# smoke.sh runs in a kernel-matrix boot (init): sandtrail doctor, then a
# recorded session as nobody that execs, forks and exits, reads a sensitive
# file, writes one, connects (TCP, UDP and to a unix socket), looks a name
# up and hits its pids limit; then
# the record is queried and verified. Every result is a line of the form
# "kernels: NAME VALUE..." on the console, which the host's test reads.
say() { echo "kernels: $*"; }
say release "$(uname -r)"
sandtrail keys generate >/dev/null 2>&1 || say error "keys generate failed"

doc="$(sandtrail doctor --format json 2>/tmp/doctor.err)"
say doctor-exit $?
say doctor-json "$(echo "$doc" | tr -d '\n')"
say doctor-stderr "$(tr '\n' ' ' </tmp/doctor.err)"

sandtrail run --user nobody --pids 8 -- sh -c '
	/bin/true
	cat /etc/shadow 2>/dev/null
	echo recorded >out.txt
	nc -w1 127.0.0.1 9 </dev/null 2>/dev/null
	nslookup smoke.example 127.0.0.1 >/dev/null 2>&1
	logger -t smoke unix 2>/dev/null
	cp /bin/busybox /tmp/true && /tmp/true && stat -c %i /tmp/true >ino.txt
	# More processes than --pids allows: a fork fails, which ends the
	# subshell (a busybox sh that cannot fork exits), and the limit is hit.
	(for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 2 & done; wait) 2>/dev/null
	exit 0
' >/tmp/run.out 2>/tmp/run.err
say run-exit $?
say run-stderr "$(grep -v '^\s*$' /tmp/run.err | grep -v '\[WARN\]' | tr '\n' '|')"

count() { # count KIND [QUERY FLAGS...]: events of KIND in the record
	kind="$1"
	shift
	n="$(sandtrail query --kind "$kind" "$@" --format jsonl 2>/dev/null | grep -c .)"
	say count "$kind" "$*" "=" "$n"
}
count collector.capabilities
count session.start
count session.terminate
count process.exec
count process.fork
count process.exit
count file.read --path /etc/shadow
count file.create --path '/var/lib/sandtrail/**/out.txt'
count net.connect
count net.dns
say count unix-connect "= $(sandtrail query --kind net.connect --format jsonl 2>/dev/null | grep -c '"proto":"unix"')"
count limit.hit
# An exec from the private /tmp (an overlay) names the file stat shows.
work="$(ls -d /var/lib/sandtrail/sessions/*/work | head -1)"
got="$(sandtrail query --kind process.exec --format jsonl 2>/dev/null | grep '"exe":"/tmp/true"' | sed -n 's/.*"exe_ino":\([0-9]*\).*/\1/p' | head -1)"
say overlay-ino "$(cat "$work/ino.txt" 2>/dev/null) ${got:-none}"
sandtrail query --kind collector.capabilities --format jsonl 2>/dev/null | head -1 | sed 's/^/kernels: capabilities-json /'
sandtrail verify >/tmp/verify.out 2>&1
say verify-exit $?
