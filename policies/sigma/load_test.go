package sigma

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// TestLoadErrors checks that every malformed or unsupported rule fails to
// load with an error that names the file, the rule and the attribute.
func TestLoadErrors(t *testing.T) {
	det := func(sel string) string {
		return ruleYAML("Bad rule", "linux", "process_creation", "    sel:\n        "+sel+"\n    condition: sel\n")
	}
	cond := func(c string) string {
		return ruleYAML("Bad rule", "linux", "process_creation",
			"    sel_a:\n        Image: /bin/sh\n    sel_b:\n        Image: /bin/bash\n    condition: '"+c+"'\n")
	}
	tests := []struct {
		name, src string
		field     string // must appear in the error
		msg       string // must appear in the error
	}{
		{"unknown modifier", det("CommandLine|contians: x"), "CommandLine|contians", `unknown modifier "contians"`},
		{"unsupported neq", det("CommandLine|neq: x"), "CommandLine|neq", `"neq" not supported`},
		{"unsupported utf16le", det("CommandLine|utf16le|base64: x"), "CommandLine|utf16le", "not supported"},
		{"unsupported expand", det("User|expand: '%Admins%'"), "User|expand", "placeholders"},
		{"unsupported time modifier", det("CommandLine|hour: 3"), "CommandLine|hour", "time modifiers"},
		{"unknown field", det("Hashes|contains: abc"), "detection.sel.Hashes|contains", `unknown field "Hashes" for logsource linux/process_creation`},
		{"sandtrail field in linux category", det("proc.exe: x"), "detection.sel.proc.exe", "unknown field"},
		{"field of another category", ruleYAML("Bad rule", "sandtrail", "process", "    sel:\n        file.path: x\n    condition: sel\n"), "file.path", "unknown field"},
		{"two position modifiers", det("CommandLine|contains|startswith: x"), "CommandLine", "at most one of"},
		{"re flag without re", det("CommandLine|i: x"), "CommandLine|i", "applies only to re"},
		{"PCRE lookahead", det("CommandLine|re: 'foo(?=bar)'"), "CommandLine|re", "not valid RE2"},
		{"PCRE backreference", det(`CommandLine|re: '(a)\1'`), "CommandLine|re", "not valid RE2"},
		{"re with contains", det("CommandLine|re|contains: x"), "CommandLine", "cannot be combined"},
		{"bad cidr", det("CommandLine|cidr: 10.0.0.0/33"), "CommandLine|cidr", "cidr value"},
		{"exists not boolean", det("CommandLine|exists: maybe"), "CommandLine|exists", "true or false"},
		{"numeric not integer", det("ProcessId|gt: many"), "ProcessId|gt", "integer"},
		{"integer field given text", det("ProcessId: abc"), "detection.sel.ProcessId", "needs an integer or a wildcard pattern"},
		{"all with one value", det("CommandLine|contains|all: x"), "CommandLine|contains|all", "two or more"},
		{"null in a list", det("CommandLine:\n            - x\n            - null"), "CommandLine", "null cannot be part of a list"},
		{"null with modifier", det("CommandLine|contains: null"), "CommandLine|contains", "null takes no modifiers"},
		{"empty value list", det("CommandLine: []"), "CommandLine", "empty list"},
		{"map value", det("CommandLine:\n            a: b"), "CommandLine", "a value must be"},
		{"base64 wildcard", det("CommandLine|base64: 'a*'"), "CommandLine|base64", "wildcards"},
		{"base64offset without contains", det("CommandLine|base64offset: abc"), "CommandLine|base64offset", "needs contains"},
		{"fieldref unknown", det("CommandLine|fieldref: Nope"), "CommandLine|fieldref", `unknown field "Nope"`},
		{"bool field string", ruleYAML("Bad rule", "sandtrail", "process", "    sel:\n        proc.fileless: yes please\n    condition: sel\n"), "proc.fileless", "true or false"},
		{"keyword list", ruleYAML("Bad rule", "linux", "process_creation", "    keywords:\n        - evil\n    condition: keywords\n"), "detection.keywords", "keyword search"},
		{"keyword all key", det("'|all':\n            - a\n            - b"), "detection.sel.|all", "keyword search"},
		{"condition unknown identifier", cond("sel_a and sel_c"), "detection.condition", `"sel_c", which detection does not define`},
		{"condition unbalanced", cond("(sel_a and sel_b"), "detection.condition", "missing )"},
		{"condition stray paren", cond("sel_a)"), "detection.condition", `unexpected ")"`},
		{"condition dangling operator", cond("sel_a and"), "detection.condition", "condition ends"},
		{"condition pattern matches nothing", cond("1 of filter_*"), "detection.condition", "matches no search identifier"},
		{"condition bare pattern", cond("sel_*"), "detection.condition", "must follow"},
		{"condition count too large", cond("3 of sel_*"), "detection.condition", "only 2 search identifiers"},
		{"condition zero of", cond("0 of them"), "detection.condition", "at least 1"},
		{"condition aggregation", cond("sel_a | count() > 5"), "detection.condition", "correlation rule"},
		{"condition bad character", cond("sel_a & sel_b"), "detection.condition", `unexpected '&'`},
		{"condition empty", cond(" "), "detection.condition", "empty condition"},
		{"condition too deep", cond(strings.Repeat("(", 100) + "sel_a" + strings.Repeat(")", 100)), "detection.condition", "nested deeper"},
		{"no condition", ruleYAML("Bad rule", "linux", "process_creation", "    sel:\n        Image: x\n"), "detection.condition", "missing"},
		{"timeframe", ruleYAML("Bad rule", "linux", "process_creation", "    sel:\n        Image: x\n    timeframe: 5m\n    condition: sel\n"), "detection.timeframe", "obsolete"},
		{"unsupported logsource", strings.Replace(det("Image: x"), "process_creation", "registry_event", 1), "logsource", `category "registry_event" is not supported`},
		{"logsource service", strings.Replace(det("Image: x"), "category: process_creation", "service: auditd", 1), "logsource.service", "not supported"},
		{"no logsource", "title: Bad rule\ndetection:\n    sel:\n        Image: x\n    condition: sel\n", "logsource", "missing"},
		{"no title", strings.Replace(det("Image: x"), "title: Bad rule", "description: x", 1), "title", "missing"},
		{"bad id", strings.Replace(det("Image: x"), "id: ", "id: not-a-uuid-", 1), "id", "is not a UUID"},
		{"bad level", strings.Replace(det("Image: x"), "level: high", "level: severe", 1), "level", `"severe" is not one of`},
		{"bad status", strings.Replace(det("Image: x"), "status: test", "status: done", 1), "status", "is not one of"},
		{"bad tag", strings.Replace(det("Image: x"), "attack.t1059", "Attack T1059", 1), "tags", "is not namespace.name"},
		{"bad date", det("Image: x") + "date: 17 June 2025\n", "date", "not a date"},
		{"unknown attribute", det("Image: x") + "severity: high\n", "severity", "unknown rule attribute"},
		{"unknown fields entry", det("Image: x") + "fields:\n    - Hashes\n", "fields", `unknown field "Hashes"`},
		{"repeated key", det("Image: x\n        Image: y"), "detection.sel", `key "Image" repeated`},
		{"not a map", "- a\n- b\n", "", "must be a map"},
		{"bad YAML", "title: [unclosed\n", "", "parsing YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse(%q) loaded; want an error", tc.src)
			}
			msg := err.Error()
			for _, want := range []string{"bad.yml", tc.field, tc.msg} {
				if !strings.Contains(msg, want) {
					t.Errorf("Parse error = %q, want it to contain %q", msg, want)
				}
			}
			if tc.name != "not a map" && tc.name != "bad YAML" && tc.name != "no title" && !strings.Contains(msg, `"Bad rule"`) {
				t.Errorf("Parse error = %q, want it to name the rule", msg)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("Parse error %T is not an *Error", err)
			}
		})
	}
}

// TestLoadJoinsErrors checks that the problems of several rules and files
// are all reported.
func TestLoadJoinsErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"a.yml":      {Data: []byte(ruleYAML("First", "linux", "process_creation", "    sel:\n        Nope: x\n    condition: sel\n"))},
		"b/c.yaml":   {Data: []byte(ruleYAML("Second", "linux", "process_creation", "    sel:\n        Image|bad: x\n    condition: sel\n"))},
		"b/ok.yml":   {Data: []byte(ruleYAML("Fine", "linux", "process_creation", "    sel:\n        Image: x\n    condition: sel\n"))},
		"readme.txt": {Data: []byte("not a rule")},
	}
	_, err := Load(fsys)
	if err == nil {
		t.Fatal("Load loaded; want errors")
	}
	var n int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *Error
		if errors.As(e, &se) {
			n++
		}
	}
	if n != 2 || !strings.Contains(err.Error(), `a.yml:`) || !strings.Contains(err.Error(), `b/c.yaml:`) ||
		!strings.Contains(err.Error(), `"First"`) || !strings.Contains(err.Error(), `"Second"`) {
		t.Errorf("Load error = %v, want two errors naming a.yml First and b/c.yaml Second", err)
	}
	s, err := Load(fsys, "b/ok.yml")
	if err != nil || len(s.Rules()) != 1 {
		t.Errorf("Load(b/ok.yml) = %v, %v; want one rule", s, err)
	}
}

// TestLoadLimits checks the size and alias bounds.
func TestLoadLimits(t *testing.T) {
	big := make([]byte, MaxFileSize+1)
	if _, err := Parse("big.yml", big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Parse(big) = %v, want a size error", err)
	}
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 0, "a"; i < 8; i++ {
		name := string(rune('b' + i))
		bomb += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	src := ruleYAML("Bomb", "linux", "process_creation", "    sel:\n        CommandLine: *i\n    condition: sel\n")
	if _, err := Parse("bomb.yml", []byte(src+bomb)); err == nil {
		t.Errorf("Parse(alias bomb) loaded; want an error")
	}
}

// TestLoadFiles loads the SigmaHQ rules from disk paths.
func TestLoadFiles(t *testing.T) {
	s, err := LoadFiles("../rules/sigmahq/proc_creation_lnx_susp_pipe_shell.yml")
	if err != nil || len(s.Rules()) != 1 || s.Rules()[0].File != "../rules/sigmahq/proc_creation_lnx_susp_pipe_shell.yml" {
		t.Fatalf("LoadFiles = %v, %v", s, err)
	}
	if _, err := LoadFiles("testdata/none.yml"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFiles(missing) = %v, want ErrNotExist", err)
	}
}
