//go:build !unix

package cargo

// openNonblock is unix's O_NONBLOCK; elsewhere none.
const openNonblock = 0
