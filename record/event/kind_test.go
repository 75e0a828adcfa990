package event_test

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandtrail/sandtrail/record/event"
)

// docKinds returns the kinds of the "Kinds in use" table of docs/schema.md,
// in order.
func docKinds(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(schemaDoc)
	if err != nil {
		t.Fatalf("reading schema doc: %v", err)
	}
	_, table, ok := bytes.Cut(doc, []byte("\n## Kinds in use\n"))
	if !ok {
		t.Fatalf("docs/schema.md has no \"## Kinds in use\" section")
	}
	table, _, _ = bytes.Cut(table, []byte("\n## "))
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var kinds []string
	sc := bufio.NewScanner(bytes.NewReader(table))
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			kinds = append(kinds, m[1])
		}
	}
	return kinds
}

// TestKindsMatchSchema checks the kind constants against the schema: the
// kinds table of docs/schema.md lists exactly Kinds, in order; every kind
// matches the kind pattern of docs/event.schema.json and has a category that
// Validate knows; and where a sub-object has an op enum (file, net,
// session), its ops are exactly the ops of that category's kinds.
func TestKindsMatchSchema(t *testing.T) {
	if got := docKinds(t); !slices.Equal(got, event.Kinds) {
		t.Errorf("docs/schema.md kinds = %v, want event.Kinds %v", got, event.Kinds)
	}

	props := loadSchema(t)["properties"].(map[string]any)
	re := regexp.MustCompile(props["kind"].(map[string]any)["pattern"].(string))
	ops := map[string][]string{}
	seen := map[string]bool{}
	for _, k := range event.Kinds {
		if seen[k] {
			t.Errorf("event.Kinds lists %q twice", k)
		}
		seen[k] = true
		if !re.MatchString(k) {
			t.Errorf("kind pattern rejects %q", k)
		}
		cat, op, _ := strings.Cut(k, ".")
		if !slices.Contains(event.Categories(), cat) {
			t.Errorf("kind %q has a category that Validate does not know", k)
		}
		ops[cat] = append(ops[cat], op)
	}
	for _, c := range event.Categories() {
		if len(ops[c]) == 0 {
			t.Errorf("no kind of category %q in event.Kinds", c)
		}
	}
	for _, c := range []string{"file", "net", "session"} {
		var want []string
		sub := props[c].(map[string]any)["properties"].(map[string]any)
		for _, v := range asSlice(sub["op"].(map[string]any)["enum"]) {
			want = append(want, v.(string))
		}
		got := slices.Sorted(slices.Values(ops[c]))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("ops of the %s kinds = %v, want the %s.op enum %v", c, got, c, want)
		}
	}
}

func TestOpKinds(t *testing.T) {
	tests := []struct {
		name string
		fn   func(string) string
		op   string
		want string
	}{
		{"file read", event.FileKind, "read", event.KindFileRead},
		{"file umount", event.FileKind, "umount", event.KindFileUmount},
		{"file chmod", event.FileKind, "chmod", event.KindFileChmod},
		{"file unknown op", event.FileKind, "exec", ""},
		{"file empty op", event.FileKind, "", ""},
		{"session create", event.SessionKind, "create", event.KindSessionCreate},
		{"session cleanup", event.SessionKind, "cleanup", event.KindSessionCleanup},
		{"session unknown op", event.SessionKind, "read", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.op); got != tt.want {
				t.Errorf("kind of %q = %q, want %q", tt.op, got, tt.want)
			}
		})
	}
	for _, k := range event.Kinds {
		cat, op, _ := strings.Cut(k, ".")
		var got string
		switch cat {
		case "file":
			got = event.FileKind(op)
		case "session":
			got = event.SessionKind(op)
		default:
			continue
		}
		if got != k {
			t.Errorf("kind of %s op %q = %q, want %q", cat, op, got, k)
		}
	}
}

// TestFileKindAllocs checks that FileKind does not allocate, since the
// collector calls it for every file event.
func TestFileKindAllocs(t *testing.T) {
	op := strings.Clone("truncate")
	if n := testing.AllocsPerRun(100, func() { _ = event.FileKind(op) }); n != 0 {
		t.Errorf("FileKind allocates %v times per call, want 0", n)
	}
}
