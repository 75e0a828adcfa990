#!/usr/bin/env bash
# install.sh installs sandtrail on this machine. It is idempotent: run it again
# to upgrade the binaries; existing config, keys and data are kept.
#
#   - builds sandtrail (and sandtrail-shim, once it exists) into /usr/local/bin
#   - writes /etc/sandtrail/config.yaml if absent
#   - creates /var/lib/sandtrail and generates the checkpoint signing key
#     (root-only, 0600) if absent
#   - creates the unprivileged sandtrail-agent user that sessions run as
#   - installs the sandtrail.service systemd unit (not enabled)
#
# Environment: PREFIX (default /usr/local), SANDTRAIL_DATA_DIR (default
# /var/lib/sandtrail), SANDTRAIL_ETC (default /etc/sandtrail).
set -euo pipefail

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
go build -trimpath -o "$build/" ./cmd/...
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

if [ -d /etc/systemd/system ] && [ -e sandtrail.service ]; then
	install -m 0644 sandtrail.service /etc/systemd/system/sandtrail.service
	say "installed /etc/systemd/system/sandtrail.service (enable it with: systemctl enable --now sandtrail)"
fi
say "done"
