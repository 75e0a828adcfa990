#!/usr/bin/env bash
# install.sh installs sandtrail on this machine, or with --root into an agent
# image. It is idempotent: run it again to upgrade the binaries; existing
# config, keys and data are kept.
#
#   - builds sandtrail and sandtrail-shim into /usr/local/bin
#   - links sandtrail-shim as each package manager it stands in for (pip, pip3,
#     npm, npx, apt, apt-get, cargo) in /usr/local/lib/sandtrail/shims, and
#     puts that directory first on PATH for login shells (/etc/profile.d)
#   - with --mirror URL: points the package managers at the verifying mirror
#     system-wide, so that a bypassed shim still goes through it:
#     /etc/pip.conf, npm's global npmrc, cargo's source replacement in
#     $CARGO_HOME/config.toml, and an apt.conf.d proxy snippet
#   - writes /etc/sandtrail/config.yaml if absent
#   - creates /var/lib/sandtrail and generates the checkpoint signing key
#     (root-only, 0600) if absent
#   - creates the unprivileged sandtrail-agent user that sessions run as
#   - installs the sandtrail.service systemd unit (not enabled)
#
# With --root DIR it installs into DIR, an image root (the directory that
# becomes a container image's / or a chroot), and writes nothing outside it:
# the same binaries, shim links, profile.d and mirror configuration beneath
# DIR (npm's global npmrc at each place an image's npm may read it:
# /etc/npmrc, /usr/etc/npmrc, /usr/local/etc/npmrc), and the agent user in
# DIR/etc/passwd and DIR/etc/group. No data dir, signing key or systemd unit:
# the daemon, its journal and its key stay on the host (docs/images.md).
#
# Usage: ./install.sh [--mirror URL] [--root DIR]
#
# Environment: PREFIX (default /usr/local), SANDTRAIL_DATA_DIR (default
# /var/lib/sandtrail), SANDTRAIL_ETC (default /etc/sandtrail), CARGO_HOME
# (default /usr/local/cargo, the Rust images' own; with --mirror). With
# --root they name places inside the image.
set -euo pipefail

MIRROR=""
mirror_given=""
ROOT=""
while [ $# -gt 0 ]; do
	case "$1" in
	--mirror) [ $# -ge 2 ] || { echo "install: --mirror needs a URL" >&2; exit 2; }; MIRROR="${2%/}"; mirror_given=1; shift 2 ;;
	--mirror=*) MIRROR="${1#--mirror=}"; MIRROR="${MIRROR%/}"; mirror_given=1; shift ;;
	--root) [ $# -ge 2 ] || { echo "install: --root needs a directory" >&2; exit 2; }; ROOT="$2"; shift 2 ;;
	--root=*) ROOT="${1#--root=}"; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "install: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
[ -z "$mirror_given" ] || [ -n "$MIRROR" ] || { echo "install: --mirror needs a URL" >&2; exit 2; }
# The URL is written into pip's, npm's, cargo's and apt's own syntaxes.
case "$MIRROR" in
*[[:space:]\"\'\\]*) echo "install: --mirror $MIRROR: want a URL, without spaces, quotes or backslashes" >&2; exit 2 ;;
""|http://[!/]*|https://[!/]*) ;;
*) echo "install: --mirror $MIRROR: want an http:// or https:// URL with a host" >&2; exit 2 ;;
esac
if [ -n "$ROOT" ]; then
	[ -e "$ROOT" ] || { echo "install: --root $ROOT: no such directory (make the image root first)" >&2; exit 2; }
	[ -d "$ROOT" ] || { echo "install: --root $ROOT: not a directory" >&2; exit 2; }
	ROOT="$(cd "$ROOT" && pwd -P)"
	[ "$ROOT" != / ] || { echo "install: --root /: that is this machine; run install.sh without --root" >&2; exit 2; }
	umask 022 # an image's files are the system's: readable by the agent
fi

PREFIX="${PREFIX:-/usr/local}"
DATA_DIR="${SANDTRAIL_DATA_DIR:-/var/lib/sandtrail}"
ETC="${SANDTRAIL_ETC:-/etc/sandtrail}"
AGENT_USER="sandtrail-agent"

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }

if [ -z "$ROOT" ]; then
	[ "$(id -u)" -eq 0 ] || die "must run as root (it writes ${PREFIX}/bin, ${ETC} and ${DATA_DIR})"
else
	[ "$(id -u)" -eq 0 ] || die "must run as root (an image's system files belong to root)"
fi
command -v go >/dev/null || die "go is not on PATH; install Go 1.26 first"

# image_dirs DIR...: in an image root nothing can be assumed to exist, so
# each DIR is made (0755, with its parents) when missing. Without --root
# they are this machine's own, and left alone.
image_dirs() {
	[ -n "$ROOT" ] || return 0
	local d
	for d; do [ -d "$d" ] || mkdir -p "$d"; done
}

# has_name FILE NAME: whether the colon-separated FILE has an entry NAME.
has_name() { [ -f "$1" ] && awk -F: -v n="$2" '$1 == n { found = 1 } END { exit !found }' "$1"; }

# add_line FILE LINE appends LINE to FILE, after the newline FILE may lack.
add_line() {
	if [ -s "$1" ] && [ -n "$(tail -c 1 "$1")" ]; then echo >>"$1"; fi
	printf '%s\n' "$2" >>"$1"
}

# free_system_id FILE...: the highest id below 1000 (down to 100) that the
# third field of no entry of FILEs uses, as useradd --system chooses.
free_system_id() {
	local f
	for f; do [ ! -f "$f" ] || cat "$f"; done |
		awk -F: '{ used[$3] = 1 } END { for (i = 999; i >= 100; i--) if (!(i in used)) { print i; exit } }'
}

# image_user adds the agent user and its group to the image's own
# /etc/passwd and /etc/group (and /etc/shadow and /etc/gshadow, where the
# image has them), as `useradd --system --user-group` would: a locked
# account with no home and no login shell, on the highest id below 1000 that
# is free as both uid and gid. It reads and writes only files beneath ROOT:
# useradd --root needs an image it can chroot into, and --prefix still uses
# this machine's PAM.
image_user() {
	local passwd="$ROOT/etc/passwd" group="$ROOT/etc/group" uid gid
	if has_name "$passwd" "$AGENT_USER"; then
		return 0
	fi
	image_dirs "$ROOT/etc"
	if has_name "$group" "$AGENT_USER"; then
		gid="$(awk -F: -v n="$AGENT_USER" '$1 == n { print $3; exit }' "$group")"
		uid="$(free_system_id "$passwd")"
	else
		uid="$(free_system_id "$passwd" "$group")"
		gid="$uid"
	fi
	[ -n "$uid" ] || die "no system id below 1000 is free in $passwd and $group for $AGENT_USER"
	if ! has_name "$group" "$AGENT_USER"; then
		add_line "$group" "$AGENT_USER:x:$gid:"
		[ ! -f "$ROOT/etc/gshadow" ] || add_line "$ROOT/etc/gshadow" "$AGENT_USER:!::"
	fi
	add_line "$passwd" "$AGENT_USER:x:$uid:$gid::/nonexistent:/usr/sbin/nologin"
	[ ! -f "$ROOT/etc/shadow" ] || add_line "$ROOT/etc/shadow" "$AGENT_USER:!:::::::"
	say "added user $AGENT_USER (uid $uid, gid $gid) to $passwd and $group"
}

# set_npm_registry FILE: the registry= line of the npmrc FILE, any other
# line of the operator's kept.
set_npm_registry() {
	install -d -m 0755 "$(dirname "$1")"
	touch "$1"
	sed -i '/^registry=/d' "$1"
	printf 'registry=%s/npm/\n' "$MIRROR" >>"$1"
	say "wrote registry= in $1"
}

# image_npmrcs prints the global npmrc files an image's npm may read, as
# paths inside the image: the file a distribution's builtin npmrc names
# (globalconfig=/etc/npmrc in Debian's, Ubuntu's and Arch's npm packages),
# and upstream npm's $PREFIX/etc/npmrc for node in /usr/bin (NodeSource's
# packages) and in /usr/local/bin (the official node images).
image_npmrcs() {
	local builtin
	{
		echo /etc/npmrc
		echo /usr/etc/npmrc
		echo /usr/local/etc/npmrc
		for builtin in /usr/share/nodejs/npm/npmrc /usr/lib/node_modules/npm/npmrc /usr/local/lib/node_modules/npm/npmrc; do
			[ ! -f "$ROOT$builtin" ] ||
				sed -n 's/^[[:space:]]*globalconfig[[:space:]]*=[[:space:]]*\(\/[^$[:space:]]*\)[[:space:]]*$/\1/p' "$ROOT$builtin"
		done
	} | awk '!seen[$0]++'
}

# mirror_MANAGER points MANAGER at the mirror system-wide (--mirror), in
# its own configuration. There is one for each package manager of the
# ecosystem registry (resolver/ecosystem), each called below; a test
# (resolver's TestInstallScriptPointsEveryManager) checks both.
mirror_pip() {
	image_dirs "$ROOT/etc"
	keep "$ROOT/etc/pip.conf"
	printf '%s\n[global]\nindex-url = %s/pypi/simple/\n' "$mark" "$MIRROR" >"$ROOT/etc/pip.conf"
	say "wrote $ROOT/etc/pip.conf"
}

mirror_npm() {
	local npmrc
	if [ -z "$ROOT" ]; then
		set_npm_registry "$(npm config get globalconfig 2>/dev/null || echo /etc/npmrc)"
	else
		# The image's node is not this machine's: its npm is not asked.
		for npmrc in $(image_npmrcs); do set_npm_registry "$ROOT$npmrc"; done
	fi
}

mirror_cargo() {
	local cargo_home="${CARGO_HOME:-/usr/local/cargo}"
	install -d -m 0755 "$ROOT$cargo_home"
	keep "$ROOT$cargo_home/config.toml"
	cat >"$ROOT$cargo_home/config.toml" <<CARGO
$mark
[source.crates-io]
replace-with = "sandtrail-mirror"

[source.sandtrail-mirror]
registry = "sparse+$MIRROR/crates/index/"
CARGO
	say "wrote $ROOT$cargo_home/config.toml${ROOT:+ (cargo reads it where CARGO_HOME=$cargo_home)}"
}

# mirror_apt: apt reaches the mirror as its HTTP proxy (the mirror serves
# the Debian archives' hosts in HTTP-proxy mode).
mirror_apt() {
	image_dirs "$ROOT/etc/apt/apt.conf.d"
	printf '%s\nAcquire::http::Proxy "%s/";\n' "$mark" "$MIRROR" >"$ROOT/etc/apt/apt.conf.d/80sandtrail-mirror"
	say "wrote $ROOT/etc/apt/apt.conf.d/80sandtrail-mirror"
}

cd "$(dirname "$0")"

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
say "building binaries"
go build -trimpath -o "$build/" ./cmd/sandtrail
# The shim is static: it starts before every package-manager call (no
# dynamic loader to pay for, and no LD_PRELOAD of the agent's in it).
CGO_ENABLED=0 go build -trimpath -o "$build/" ./cmd/sandtrail-shim
if [ -n "$ROOT" ] && [ -n "$(find "$ROOT" -maxdepth 0 ! -perm -055)" ]; then
	chmod go+rx "$ROOT"
	say "made $ROOT readable and searchable by everyone (chmod go+rx): it becomes the image's /, beneath which the agent finds its commands"
fi
image_dirs "$ROOT$PREFIX/bin"
for bin in "$build"/*; do
	install -m 0755 "$bin" "${ROOT}${PREFIX}/bin/$(basename "$bin")"
	say "installed ${ROOT}${PREFIX}/bin/$(basename "$bin")"
done

install -d -m 0755 "$ROOT$ETC"
if [ ! -e "$ROOT$ETC/config.yaml" ]; then
	cat >"$ROOT$ETC/config.yaml" <<CONF
# sandtrail configuration. Precedence: flags > SANDTRAIL_* environment > this
# file > built-in defaults. Unknown keys are an error. See docs/operations.md.
data_dir: ${DATA_DIR}
log_level: info
CONF
	chmod 0644 "$ROOT$ETC/config.yaml"
	say "wrote $ROOT$ETC/config.yaml"
fi

if [ -z "$ROOT" ]; then
	install -d -m 0711 "$DATA_DIR"  # search only: session users reach their workdirs beneath it
	install -d -m 0700 "$DATA_DIR/keys"
	if [ ! -e "$DATA_DIR/keys/checkpoint.key" ]; then
		"${PREFIX}/bin/sandtrail" --config "$ETC/config.yaml" keys generate --out "$DATA_DIR/keys"
		say "generated the checkpoint signing key in $DATA_DIR/keys"
	fi
	chmod 0600 "$DATA_DIR/keys/checkpoint.key"

	if ! id -u "$AGENT_USER" >/dev/null 2>&1; then
		useradd --system --user-group --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin "$AGENT_USER"
		say "created user $AGENT_USER"
	fi
else
	say "no data dir and no signing key in the image: the daemon, its journal and its key stay on the host"
	image_user
fi

SHIM_DIR="${PREFIX}/lib/sandtrail/shims"
install -d -m 0755 "$ROOT$SHIM_DIR"
# The links name the shim by its path in the image, which is this machine's
# without --root.
for name in $("${ROOT}${PREFIX}/bin/sandtrail-shim" list); do
	ln -sfn "${PREFIX}/bin/sandtrail-shim" "$ROOT$SHIM_DIR/$name"
done
say "linked the shims in $ROOT$SHIM_DIR: $(ls "$ROOT$SHIM_DIR" | tr '\n' ' ')"
image_dirs "$ROOT/etc/profile.d"
cat >"$ROOT/etc/profile.d/sandtrail-shims.sh" <<PROFILE
# sandtrail: the package-manager shims come first on PATH (see docs/shims.md).
case ":\$PATH:" in *":$SHIM_DIR:"*) ;; *) PATH="$SHIM_DIR:\$PATH"; export PATH ;; esac
PROFILE
chmod 0644 "$ROOT/etc/profile.d/sandtrail-shims.sh"
say "wrote $ROOT/etc/profile.d/sandtrail-shims.sh (in a Dockerfile: ENV PATH=$SHIM_DIR:\$PATH)"

if [ -n "$MIRROR" ]; then
	# A config block sandtrail owns is marked, and rewritten in place.
	mark="# sandtrail mirror (install.sh --mirror)"
	# keep FILE: a file of the operator's own is kept as FILE.sandtrail-bak
	# before sandtrail's replaces it.
	keep() { if [ -e "$1" ] && ! grep -qF "$mark" "$1"; then cp -p "$1" "$1.sandtrail-bak"; say "kept $1 as $1.sandtrail-bak"; fi; }
	mirror_pip
	mirror_npm
	mirror_cargo
	mirror_apt
fi

if [ -z "$ROOT" ] && [ -d /etc/systemd/system ] && [ -e sandtrail.service ]; then
	install -m 0644 sandtrail.service /etc/systemd/system/sandtrail.service
	say "installed /etc/systemd/system/sandtrail.service (enable it with: systemctl enable --now sandtrail)"
fi
say "done${ROOT:+: $ROOT holds what an agent image needs of sandtrail (docs/images.md)}"
