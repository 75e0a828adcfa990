package daemon

import (
	"github.com/sandtrail/sandtrail/policies"
	"github.com/sandtrail/sandtrail/policies/rules"
)

// NewDetector loads the detection rules the policy asks for (the built-in
// ones, its detections.rules, less detections.disable, at
// detections.levels) and returns the Detector that the daemon's tap feeds
// every journaled event. A rule that does not load stops the daemon: a
// detection silently missing is worse than a daemon that says why it
// cannot start.
func NewDetector(pol *policies.Engine, host string) (*rules.Detector, error) {
	set, err := rules.Load(pol.Detections())
	if err != nil {
		return nil, err
	}
	return rules.NewDetector(set, []rules.Option{rules.WithHost(host)}), nil
}
