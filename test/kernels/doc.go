// Package kernels is the kernel matrix: TestKernelMatrix boots Debian's
// cloud kernels (5.10, 6.1, 6.12) under qemu with software emulation, with
// an initramfs that holds busybox and the static sandtrail binaries of this
// checkout, runs a smoke session in each (smoke.sh) and checks what it
// recorded. fetch.sh downloads the kernels from Debian's archive without
// touching the system's apt state; boot.sh builds the initramfs and boots
// one; init is the guest's PID 1. make kernels runs it alone; make test runs
// it with everything else. The table in docs/kernels.md is its output.
package kernels
