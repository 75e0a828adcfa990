package resolver

import "testing"

func TestNormalizeName(t *testing.T) {
	tests := []struct {
		name, eco, in, want string
	}{
		{name: "pypi underscore", eco: "pypi", in: "Typing_Extensions", want: "typing-extensions"},
		{name: "pypi dot", eco: "pypi", in: "zope.interface", want: "zope-interface"},
		{name: "pypi separator run", eco: "pypi", in: "Django_Rest.-Framework", want: "django-rest-framework"},
		{name: "cargo", eco: "cargo", in: "Serde_JSON", want: "serde-json"},
		{name: "cargo keeps dots", eco: "cargo", in: "a.b", want: "a.b"},
		{name: "npm is case-sensitive", eco: "npm", in: "JSONStream", want: "JSONStream"},
		{name: "npm scope", eco: "npm", in: "@Babel/Core_x", want: "@Babel/Core_x"},
		{name: "deb", eco: "deb", in: "LibC6", want: "libc6"},
		{name: "oci", eco: "oci", in: "Library/Alpine", want: "library/alpine"},
		{name: "unknown ecosystem", eco: "nosuch", in: "Rails_X", want: "Rails_X"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeName(tt.eco, tt.in); got != tt.want {
				t.Errorf("NormalizeName(%q, %q) = %q, want %q", tt.eco, tt.in, got, tt.want)
			}
		})
	}
}
