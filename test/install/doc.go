// Package install holds the tests of install.sh. The image tests install
// only into scratch image roots (install.sh --root DIR): each run happens
// in a mount namespace of its own whose root mount is read-only but for
// the scratch directory and Go's caches, so a write outside the image
// root fails instead of landing here, and this machine's own
// configuration is compared before and after. They check every file an
// image install writes, run the real npm, pip, cargo and apt-config
// against the files to show that those managers read them, run the shim
// inside the image as its agent user (chroot), and check that bad
// arguments are refused with a clear message before anything is written.
//
// TestInstalledCleanInstalls installs onto this machine's own paths, as a
// user does (install.sh without --root), but in a scratch system: a mount
// namespace in which /etc, /usr, /var and /run are overlays whose writes
// land in a scratch directory (scratchSystem). There the installed daemon
// hosts sessions that `sandtrail run` starts as the default agent user,
// whose PATH finds install.sh's symlinked shims, and 50 clean installs
// (npm from the real registry, pip and cargo from fixture indexes, apt
// from the Debian archive through the broker) must raise no alert and
// leave only shim+mirror, verified rows; then scripts/demo.sh, `make
// demo`'s last step, runs on the same layout and must raise none either.
//
// install.sh runs as root only, so the tests need root; without it they
// skip, saying why. The package has no code of its own.
package install
