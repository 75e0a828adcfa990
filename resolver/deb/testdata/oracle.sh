#!/usr/bin/env bash
# Differential oracle: runs dpkg --compare-versions over NUL-separated triples (a, b, op) on
# stdin and prints, per triple, the exit codes of "a lt b", "a gt b" and "a op b", and 1 if
# dpkg reported bad syntax (a warning or an error) on any of them, else 0.
set -uo pipefail
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# cmp runs one comparison; it sets rc, and bad=1 on a syntax complaint. No subshells: dpkg is
# the only process started per call.
cmp() {
	dpkg --compare-versions -- "$1" "$2" "$3" 2>"$tmp" >/dev/null
	rc=$?
	local err=''
	IFS= read -r -d '' err <"$tmp" || true
	[[ $err == *"bad syntax"* ]] && bad=1
	return 0
}
while IFS= read -r -d '' a && IFS= read -r -d '' b && IFS= read -r -d '' op; do
	bad=0
	cmp "$a" lt "$b"; lt=$rc
	cmp "$a" gt "$b"; gt=$rc
	cmp "$a" "$op" "$b"; rel=$rc
	echo "$lt $gt $rel $bad"
done
