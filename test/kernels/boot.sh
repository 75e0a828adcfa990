#!/usr/bin/env bash
# boot.sh builds an initramfs holding the static sandtrail binaries, busybox,
# init and smoke.sh, boots KERNEL_DIR's kernel under qemu (software
# emulation: nested KVM is not available on every host) and writes the
# console to LOG. It exits 0 when the boot reached the end of smoke.sh.
# Usage: boot.sh KERNEL_DIR BIN_DIR LOG
set -euo pipefail

kdir="$1"
bin="$2"
log="$3"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

chmod 755 "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,var/lib,root,lib/modules,usr/bin,usr/sbin,usr/local/bin}
cp /bin/busybox "$root/bin/busybox"
for a in $("$root/bin/busybox" --list); do
	[ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"
done
cp "$kdir"/modules/*.ko "$root/lib/modules/"
cp "$bin"/sandtrail "$bin"/sandtrail-shim "$root/usr/local/bin/"
cp "$here/init" "$root/init"
cp "$here/smoke.sh" "$root/smoke.sh"
chmod +x "$root/init"
cat >"$root/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/bin/sh
sandtrail-agent:x:990:990:sandtrail agent:/nonexistent:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/sh
PASSWD
cat >"$root/etc/group" <<GROUP
root:x:0:
sandtrail-agent:x:990:
nogroup:x:65534:
GROUP
echo 'root:*:1::::::' >"$root/etc/shadow"
chmod 640 "$root/etc/shadow"
echo 'nameserver 127.0.0.53' >"$root/etc/resolv.conf"
echo '127.0.0.1 localhost' >"$root/etc/hosts"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$root.cpio.gz"
trap 'rm -rf "$root" "$root.cpio.gz"' EXIT

# no_timer_check: under emulation on a loaded host the kernel's IO-APIC
# timer check can fail and panic ("IO-APIC + timer doesn't work"); the
# check is for real hardware.
timeout "${KERNELS_BOOT_TIMEOUT:-300}" qemu-system-x86_64 \
	-accel tcg -cpu max -m 2048 -smp 1 -nic none \
	-kernel "$kdir/vmlinuz" -initrd "$root.cpio.gz" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 no_timer_check" \
	-nographic -no-reboot -monitor none -serial stdio </dev/null >"$log" 2>&1 || true
tr -d '\r' <"$log" >"$log.tmp" && mv "$log.tmp" "$log"
grep -q '^kernels: done' "$log"
