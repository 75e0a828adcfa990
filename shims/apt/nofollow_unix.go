//go:build unix

package apt

import "syscall"

const oNoFollow = syscall.O_NOFOLLOW
