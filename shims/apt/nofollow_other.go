//go:build !unix

package apt

const oNoFollow = 0
