//go:build !linux

package daemon

import "errors"

// sockDiagAnswers returns an error: sock_diag is Linux's.
func sockDiagAnswers(family, protocol uint8) (bool, error) {
	return false, errors.New("sock_diag: not supported on this system")
}

// The families and protocols that sockDiag asks about; their values do
// not matter here.
const (
	diagInet = 2
	diagUnix = 1
	diagTCP  = 6
	diagUDP  = 17
)
