package npm

import (
	"errors"
	"testing"
)

func TestBestWithTags(t *testing.T) {
	candidates := []string{"1.0.0", "1.1.0", "1.2.0", "2.0.0-rc.1", "2.0.0-rc.2", "0.9.0"}
	tags := map[string]string{"latest": "1.1.0", "next": "2.0.0-rc.1", "gone": "3.0.0"}
	tests := []struct {
		name, spec, want string
		err              error
	}{
		{"empty spec takes latest", "", "1.1.0", nil},
		{"star takes latest", "*", "1.1.0", nil},
		{"range satisfied by latest prefers it", "^1.0.0", "1.1.0", nil},
		{"range not satisfied by latest takes the highest", ">=1.2.0 <2", "1.2.0", nil},
		{"prerelease range", ">=2.0.0-rc.1", "2.0.0-rc.2", nil},
		{"tag", "next", "2.0.0-rc.1", nil},
		{"tag latest", "latest", "1.1.0", nil},
		{"exact version", "1.0.0", "1.0.0", nil},
		{"exact loose version", "v1.0.0", "1.0.0", nil},
		{"unknown tag", "beta", "", ErrNoMatch},
		{"tag pointing nowhere", "gone", "", ErrNoMatch},
		{"missing version", "1.0.1", "", ErrNoMatch},
		{"no range match", "^5", "", ErrNoMatch},
		{"invalid tag name", "a b/c", "", ErrInvalidRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BestWithTags(tt.spec, candidates, tags)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("BestWithTags(%q) = %q, %v, want %q, %v", tt.spec, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestRangeString(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"caret", "^1.2.3", ">=1.2.3 <2.0.0-0"},
		{"caret 0.0.x", "^0.0.3", ">=0.0.3 <0.0.4-0"},
		{"x-range", "1.x", ">=1.0.0 <2.0.0-0"},
		{"hyphen partial", "1.2 - 2.3", ">=1.2.0 <2.4.0-0"},
		{"star", "*", ""},
		{"or", "1.2.3 || 2", "1.2.3||>=2.0.0 <3.0.0-0"},
		{"null set", "<0.0.0-0 || 1.0.0", "1.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRange(tt.in, NPM)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("ParseRange(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBestWithTagsNoLatest(t *testing.T) {
	// An empty spec is "*", not the "latest" tag: without the tag the highest release wins.
	if got, err := BestWithTags("", []string{"1.0.0", "1.1.0", "2.0.0-rc.1"}, nil); err != nil || got != "1.1.0" {
		t.Errorf("BestWithTags(\"\", no tags) = %q, %v, want 1.1.0", got, err)
	}
	if got, err := BestWithTags("latest", []string{"1.0.0"}, nil); !errors.Is(err, ErrNoMatch) {
		t.Errorf("BestWithTags(latest, no tags) = %q, %v, want ErrNoMatch", got, err)
	}
}
