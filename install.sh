#!/usr/bin/env bash
# install.sh installs sandtrail on this machine. It is idempotent: run it again
# to upgrade the binaries; existing config, keys and data are kept.
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
# Usage: ./install.sh [--mirror URL]
#
# Environment: PREFIX (default /usr/local), SANDTRAIL_DATA_DIR (default
# /var/lib/sandtrail), SANDTRAIL_ETC (default /etc/sandtrail), CARGO_HOME
# (default /usr/local/cargo, the Rust images' own; with --mirror).
set -euo pipefail

MIRROR=""
mirror_given=""
while [ $# -gt 0 ]; do
	case "$1" in
	--mirror) [ $# -ge 2 ] || { echo "install: --mirror needs a URL" >&2; exit 2; }; MIRROR="${2%/}"; mirror_given=1; shift 2 ;;
	--mirror=*) MIRROR="${1#--mirror=}"; MIRROR="${MIRROR%/}"; mirror_given=1; shift ;;
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

PREFIX="${PREFIX:-/usr/local}"
DATA_DIR="${SANDTRAIL_DATA_DIR:-/var/lib/sandtrail}"
ETC="${SANDTRAIL_ETC:-/etc/sandtrail}"
AGENT_USER="sandtrail-agent"

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (it writes ${PREFIX}/bin, ${ETC} and ${DATA_DIR})"
command -v go >/dev/null || die "go is not on PATH; install Go 1.26 first"

cd "$(dirname "$0")"

build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
say "building binaries"
go build -trimpath -o "$build/" ./cmd/sandtrail
# The shim is static: it starts before every package-manager call (no
# dynamic loader to pay for, and no LD_PRELOAD of the agent's in it).
CGO_ENABLED=0 go build -trimpath -o "$build/" ./cmd/sandtrail-shim
for bin in "$build"/*; do
	install -m 0755 "$bin" "${PREFIX}/bin/$(basename "$bin")"
	say "installed ${PREFIX}/bin/$(basename "$bin")"
done

install -d -m 0755 "$ETC"
if [ ! -e "$ETC/config.yaml" ]; then
	cat >"$ETC/config.yaml" <<CONF
# sandtrail configuration. Precedence: flags > SANDTRAIL_* environment > this
# file > built-in defaults. Unknown keys are an error. See docs/operations.md.
data_dir: ${DATA_DIR}
log_level: info
CONF
	chmod 0644 "$ETC/config.yaml"
	say "wrote $ETC/config.yaml"
fi

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

SHIM_DIR="${PREFIX}/lib/sandtrail/shims"
install -d -m 0755 "$SHIM_DIR"
for name in $("${PREFIX}/bin/sandtrail-shim" list); do
	ln -sfn "${PREFIX}/bin/sandtrail-shim" "$SHIM_DIR/$name"
done
say "linked the shims in $SHIM_DIR: $(ls "$SHIM_DIR" | tr '\n' ' ')"
cat >/etc/profile.d/sandtrail-shims.sh <<PROFILE
# sandtrail: the package-manager shims come first on PATH (see docs/shims.md).
case ":\$PATH:" in *":$SHIM_DIR:"*) ;; *) PATH="$SHIM_DIR:\$PATH"; export PATH ;; esac
PROFILE
chmod 0644 /etc/profile.d/sandtrail-shims.sh
say "wrote /etc/profile.d/sandtrail-shims.sh (in a Dockerfile: ENV PATH=$SHIM_DIR:\$PATH)"

if [ -n "$MIRROR" ]; then
	# A config block sandtrail owns is marked, and rewritten in place.
	mark="# sandtrail mirror (install.sh --mirror)"
	# keep FILE: a file of the operator's own is kept as FILE.sandtrail-bak
	# before sandtrail's replaces it.
	keep() { if [ -e "$1" ] && ! grep -qF "$mark" "$1"; then cp -p "$1" "$1.sandtrail-bak"; say "kept $1 as $1.sandtrail-bak"; fi; }
	keep /etc/pip.conf
	printf '%s\n[global]\nindex-url = %s/pypi/simple/\n' "$mark" "$MIRROR" >/etc/pip.conf
	say "wrote /etc/pip.conf"
	npmrc="$(npm config get globalconfig 2>/dev/null || echo /etc/npmrc)"
	install -d -m 0755 "$(dirname "$npmrc")"
	touch "$npmrc"
	sed -i '/^registry=/d' "$npmrc"
	printf 'registry=%s/npm/\n' "$MIRROR" >>"$npmrc"
	say "wrote registry= in $npmrc"
	cargo_home="${CARGO_HOME:-/usr/local/cargo}"
	install -d -m 0755 "$cargo_home"
	keep "$cargo_home/config.toml"
	cat >"$cargo_home/config.toml" <<CARGO
$mark
[source.crates-io]
replace-with = "sandtrail-mirror"

[source.sandtrail-mirror]
registry = "sparse+$MIRROR/crates/index/"
CARGO
	say "wrote $cargo_home/config.toml"
	printf '%s\nAcquire::http::Proxy "%s/";\n' "$mark" "$MIRROR" >/etc/apt/apt.conf.d/80sandtrail-mirror
	say "wrote /etc/apt/apt.conf.d/80sandtrail-mirror"
fi

if [ -d /etc/systemd/system ] && [ -e sandtrail.service ]; then
	install -m 0644 sandtrail.service /etc/systemd/system/sandtrail.service
	say "installed /etc/systemd/system/sandtrail.service (enable it with: systemctl enable --now sandtrail)"
fi
say "done"
