//go:build !unix

package shims

// openNonblock is unix's O_NONBLOCK; elsewhere there is none.
const openNonblock = 0
