// Package install holds the tests of install.sh. They install only into
// scratch image roots (install.sh --root DIR), never into this machine:
// each run happens in a mount namespace of its own whose root mount is
// read-only but for the scratch directory and Go's caches, so a write
// outside the image root fails instead of landing here, and this machine's
// own configuration is compared before and after. They check every file an
// image install writes, run the real npm, pip, cargo and apt-config against
// the files to show that those managers read them, run the shim inside the
// image as its agent user (chroot), and check that bad arguments are
// refused with a clear message before anything is written.
//
// install.sh runs as root only, so the tests need root; without it they
// skip, saying why. The package has no code of its own.
package install
