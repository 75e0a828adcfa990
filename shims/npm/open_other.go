//go:build !unix

package npm

const openFlags = 0
