// Package rules holds sandtrail's built-in detection rules, Sigma YAML in
// this directory (and SigmaHQ's, unchanged, in sigmahq/), and runs them
// with the policy's own over the record: a Detector takes the journaled
// events in order and returns the alert events they raise.
//
// Trust: rules are the operator's configuration (root's, like the policy),
// parsed as untrusted bytes by policies/sigma. Events are the record; a
// rule over fields the agent wrote (argv, cwd, a shim's claims) detects,
// but an agent that knows the rule can write around it, which is why the
// built-in rules lean on what the kernel saw (pipe inodes, uids, connects,
// the file executed). Alerts name their evidence by seq (event.Alert.Refs).
package rules

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/sigma"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/pkgview"
)

//go:embed *.yml sigmahq/*.yml
var builtin embed.FS

// Builtin returns the built-in rule files: *.yml, and sigmahq/*.yml.
func Builtin() fs.FS { return builtin }

// BuiltinLabel prefixes the built-in rules' files (sigma.Rule.File).
const BuiltinLabel = "builtin:"

// Set is what a Detector runs: the built-in rules and the policy's, with
// the policy's disabled rules and levels applied. It is immutable.
type Set struct {
	sigma    *sigma.Set
	disabled map[*sigma.Rule]bool
	levels   map[*sigma.Rule]string
	// viewOff and viewLevels are the policy's for the package view's
	// rules (pkgview.Rules), which are Go, not Sigma.
	viewOff    map[string]bool
	viewLevels map[string]string
}

// Load loads the built-in rules and the files and directories d.Rules
// names into one set, so that a correlation of the policy's may name a
// built-in rule, and applies d.Disable and d.Levels. A rule that does not
// load, a path that cannot be read, and a name in Disable or Levels that
// no rule has, are errors.
func Load(d policies.Detections) (*Set, error) {
	srcs := []sigma.Source{{FS: builtin, Label: BuiltinLabel}}
	for _, p := range d.Rules {
		src, err := pathSource(p)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	ss, err := sigma.LoadSources(srcs...)
	if err != nil {
		return nil, fmt.Errorf("loading detection rules: %w", err)
	}
	s := &Set{sigma: ss, disabled: map[*sigma.Rule]bool{}, levels: map[*sigma.Rule]string{},
		viewOff: map[string]bool{}, viewLevels: map[string]string{}}
	for _, ref := range d.Disable {
		switch r := s.Find(ref); {
		case r != nil:
			s.disabled[r] = true
		case slices.Contains(pkgview.Rules, ref):
			s.viewOff[ref] = true
		default:
			return nil, fmt.Errorf("detections.disable: no rule has the id or name %q", ref)
		}
	}
	for ref, lv := range d.Levels {
		switch r := s.Find(ref); {
		case r != nil:
			s.levels[r] = lv
		case slices.Contains(pkgview.Rules, ref):
			s.viewLevels[ref] = lv
		default:
			return nil, fmt.Errorf("detections.levels: no rule has the id or name %q", ref)
		}
	}
	return s, nil
}

// pathSource is a rule file, or a directory of them, as a sigma.Source.
func pathSource(p string) (sigma.Source, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return sigma.Source{}, fmt.Errorf("reading detection rules: %w", err)
	}
	if fi.IsDir() {
		return sigma.Source{FS: os.DirFS(p), Label: filepath.Clean(p) + "/"}, nil
	}
	dir, name := filepath.Split(p)
	if dir == "" {
		dir = "."
	}
	return sigma.Source{FS: os.DirFS(dir), Names: []string{name}, Label: filepath.Clean(dir) + "/"}, nil
}

// Apply applies the policy to an alert of the package view's rules: it
// reports false when the policy disabled the rule, and sets the level the
// policy gives it. Other alerts are left as they are (the Detector's are
// already the policy's).
func (s *Set) Apply(a *event.Alert) bool {
	if a == nil || !slices.Contains(pkgview.Rules, a.RuleID) {
		return true
	}
	if s.viewOff[a.RuleID] {
		return false
	}
	if lv, ok := s.viewLevels[a.RuleID]; ok {
		a.Level = lv
	}
	return true
}

// ViewRule is what the policy says of a package view rule (one of
// pkgview.Rules): the level it sets ("" when it sets none) and whether it
// disables it.
func (s *Set) ViewRule(name string) (level string, disabled bool) {
	return s.viewLevels[name], s.viewOff[name]
}

// Rules returns the rules in load order: the built-in ones first.
func (s *Set) Rules() []*sigma.Rule { return s.sigma.Rules() }

// Find returns the rule whose id or name is ref, or nil.
func (s *Set) Find(ref string) *sigma.Rule {
	for _, r := range s.sigma.Rules() {
		if r.ID == ref || (r.Name != "" && r.Name == ref) {
			return r
		}
	}
	return nil
}

// Disabled reports whether the policy disabled r: it is evaluated (a
// correlation may need it) but raises no alert.
func (s *Set) Disabled(r *sigma.Rule) bool { return s.disabled[r] }

// Level is the level of r's alerts: the policy's, or the rule's own.
func (s *Set) Level(r *sigma.Rule) string {
	if lv, ok := s.levels[r]; ok {
		return lv
	}
	return r.Level
}

// Builtin reports whether r is one of the built-in rules.
func (s *Set) Builtin(r *sigma.Rule) bool {
	return strings.HasPrefix(r.File, BuiltinLabel)
}

// Sigma returns the loaded sigma set, for an Evaluator.
func (s *Set) Sigma() *sigma.Set { return s.sigma }

// Name is how the alerts of the rule with this id are shown: the rule's
// name when it has one, else the id itself (an alert of the package view,
// shim_bypass, is its own name).
func (s *Set) Name(ruleID string) string {
	if r := s.Find(ruleID); r != nil && r.Name != "" {
		return r.Name
	}
	return ruleID
}

// Selects reports whether ref (a rule's id or name, as a user gives it)
// names the rule of an alert whose rule_id is ruleID.
func (s *Set) Selects(ref, ruleID string) bool {
	if ref == ruleID {
		return true
	}
	r := s.Find(ref)
	return r != nil && r.ID == ruleID
}

// AtLeast reports whether level is min or above, in Sigma's order
// (event.AlertLevels); an unknown level is below every known one.
func AtLeast(level, min string) bool {
	return event.LevelRank(level) >= event.LevelRank(min)
}
