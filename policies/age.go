package policies

import (
	"fmt"
	"strings"
)

// checkAgeRecipient reports whether s looks like an age recipient: a
// lower-case Bech32 string (BIP 173, with a valid checksum) whose
// human-readable part is "age" with a 32-byte X25519 key, or "age1NAME" for
// a plugin recipient. It does not import age: it only catches typos and
// pasted identities (AGE-SECRET-KEY-1…) before full I/O is sealed to them.
func checkAgeRecipient(s string) error {
	if strings.HasPrefix(strings.ToUpper(s), "AGE-SECRET-KEY-") {
		return fmt.Errorf("%.16q… is an age identity (a secret key), not a recipient", s)
	}
	if !strings.HasPrefix(strings.ToLower(s), "age1") {
		return fmt.Errorf("%.24q is not an age recipient: want age1…", s)
	}
	if s != strings.ToLower(s) {
		return fmt.Errorf("%q: an age recipient is lower case", s)
	}
	hrp, data, err := bech32Decode(s)
	if err != nil {
		return fmt.Errorf("%q is not an age recipient: %w", s, err)
	}
	switch {
	case hrp == "age":
		key, err := convertBits(data, 5, 8)
		if err != nil {
			return fmt.Errorf("%q is not an age recipient: %w", s, err)
		}
		if len(key) != 32 {
			return fmt.Errorf("%q is not an age recipient: key is %d bytes, want 32", s, len(key))
		}
	case strings.HasPrefix(hrp, "age1") && len(hrp) > 4:
		// A plugin recipient; its payload is the plugin's business.
	default:
		return fmt.Errorf("%q is not an age recipient: want age1…", s)
	}
	return nil
}

const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// bech32Decode decodes a lower-case Bech32 string and verifies its
// checksum. It returns the human-readable part and the 5-bit data without
// the checksum. Unlike BIP 173 it allows strings longer than 90 characters,
// as age's plugin recipients are.
func bech32Decode(s string) (string, []byte, error) {
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || sep+7 > len(s) {
		return "", nil, fmt.Errorf("bech32: missing separator or checksum")
	}
	hrp := s[:sep]
	for i := 0; i < len(hrp); i++ {
		if hrp[i] < 33 || hrp[i] > 126 {
			return "", nil, fmt.Errorf("bech32: bad character in prefix")
		}
	}
	data := make([]byte, 0, len(s)-sep-1)
	for i := sep + 1; i < len(s); i++ {
		d := strings.IndexByte(bech32Charset, s[i])
		if d < 0 {
			return "", nil, fmt.Errorf("bech32: bad character %q", s[i])
		}
		data = append(data, byte(d))
	}
	if bech32Polymod(append(bech32HRPExpand(hrp), data...)) != 1 {
		return "", nil, fmt.Errorf("bech32: bad checksum")
	}
	return hrp, data[:len(data)-6], nil
}

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := 0; i < 5; i++ {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func bech32HRPExpand(hrp string) []byte {
	out := make([]byte, 0, len(hrp)*2+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

// convertBits regroups 5-bit groups into bytes, rejecting non-zero padding.
func convertBits(data []byte, from, to uint) ([]byte, error) {
	var acc, bits uint32
	var out []byte
	maxv := uint32(1)<<to - 1
	for _, v := range data {
		acc = acc<<from | uint32(v)
		bits += uint32(from)
		for bits >= uint32(to) {
			bits -= uint32(to)
			out = append(out, byte(acc>>bits&maxv))
		}
	}
	if bits >= uint32(from) || (acc<<(uint32(to)-bits))&maxv != 0 {
		return nil, fmt.Errorf("bech32: bad padding")
	}
	return out, nil
}
