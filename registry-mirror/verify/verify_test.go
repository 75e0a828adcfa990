package verify

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReader(t *testing.T) {
	data := []byte(strings.Repeat("artifact bytes ", 1000))
	s1, s256, s512 := sha1.Sum(data), sha256.Sum256(data), sha512.Sum512(data)
	good := []Digest{{SHA512, s512[:]}, {SHA1, s1[:]}}
	bad := []Digest{{SHA256, make([]byte, 32)}}
	tests := []struct {
		name  string
		max   int64
		exact bool
		want  []Digest
		err   error
	}{
		{name: "matches", max: int64(len(data)), exact: true, want: good},
		{name: "no size limit", want: good},
		{name: "mismatch", want: bad, err: ErrMismatch},
		{name: "one of two mismatches", want: append(good[:1:1], bad...), err: ErrMismatch},
		{name: "too large", max: int64(len(data)) - 1, want: good, err: ErrTooLarge},
		{name: "too small", max: int64(len(data)) + 1, exact: true, want: good, err: ErrSize},
		{name: "larger limit, not exact", max: int64(len(data)) + 100, want: good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewReader(iotest.OneByteReader(bytes.NewReader(data)), tt.max, tt.exact, tt.want...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(v)
			if !errors.Is(err, tt.err) {
				t.Fatalf("ReadAll = %v, want %v", err, tt.err)
			}
			if tt.err != nil {
				return
			}
			if !bytes.Equal(got, data) || v.Size() != int64(len(data)) {
				t.Errorf("read %d bytes, want %d", len(got), len(data))
			}
			if d, ok := v.Sum(SHA256); !ok || !bytes.Equal(d.Sum, s256[:]) {
				t.Errorf("Sum(sha256) = %v, want %x", d, s256)
			}
			// The error is sticky.
			if _, err := v.Read(make([]byte, 1)); tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("Read after the end = %v", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	data := []byte("x")
	s512, s256 := sha512.Sum512(data), sha256.Sum256(data)
	sri := "sha512-" + base64.StdEncoding.EncodeToString(s512[:])
	ds, err := SRI("sha1-AAAA " + sri + "?opt md5-xyz")
	if err == nil {
		t.Errorf("SRI with a bad sha1 = %v, want an error", ds)
	}
	ds, err = SRI(sri + " md5-xyz")
	if err != nil || len(ds) != 1 || ds[0].String() != sri {
		t.Errorf("SRI(%q) = %v, %v", sri, ds, err)
	}
	for _, bad := range []string{"", "md5-abc", "sha512-!!", "sha512-" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := SRI(bad); err == nil {
			t.Errorf("SRI(%q) = nil error", bad)
		}
	}
	h := hex.EncodeToString(s256[:])
	if d, err := OCI("sha256:" + h); err != nil || d.String() != "sha256:"+h {
		t.Errorf("OCI = %v, %v", d, err)
	}
	for _, bad := range []string{"sha256:" + h[:10], "md5:" + h, h, "sha256:zz" + h[2:]} {
		if _, err := OCI(bad); err == nil {
			t.Errorf("OCI(%q) = nil error", bad)
		}
	}
	if _, err := Hex(SHA1, h); err == nil {
		t.Error("Hex(sha1, a sha256) = nil error")
	}
}

func FuzzSRI(f *testing.F) {
	f.Add("sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==")
	f.Add("sha1-AAAA sha256-?x")
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := SRI(s)
		if err != nil {
			return
		}
		for _, d := range ds {
			if len(d.Sum) != size(d.Alg) {
				t.Fatalf("SRI(%q) gave %s of %d bytes", s, d.Alg, len(d.Sum))
			}
		}
	})
}
