//go:build !unix

package pip

const openFlags = 0
