package daemon

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sandtrail/sandtrail/collector"
	"github.com/sandtrail/sandtrail/kernel/cgroup"
	"github.com/sandtrail/sandtrail/record/event"
	"github.com/sandtrail/sandtrail/record/render"
)

// Diagnosis is what `sandtrail doctor` finds on this machine, before
// anything runs: the kernel collector's capabilities on this kernel
// (collector.Probe), what a policy requires of them, the cgroup layout,
// tracefs and the sock_diag modules, and the nearest configuration in
// which sandtrail runs. Its JSON is doctor's --format json.
type Diagnosis struct {
	// Kernel is the probe's account of each capability; nil when the
	// kernel could not be probed (ProbeError says why).
	Kernel     *event.Kernel `json:"kernel,omitempty"`
	ProbeError string        `json:"probe_error,omitempty"`
	// Policy is the policy file whose require list Require is; empty
	// for the embedded default.
	Policy string `json:"policy"`
	// Require is the policy's require list.
	Require []string `json:"require"`
	// Unmet are the capabilities that the collector or Require needs and
	// the kernel lacks (render.Unmet); sandtrail does not start while
	// there are any.
	Unmet []string `json:"unmet"`
	// Nearest says in a sentence the nearest configuration in which
	// sandtrail runs (render.Nearest).
	Nearest  string       `json:"nearest"`
	Cgroups  CgroupLayout `json:"cgroups"`
	Tracefs  Tracefs      `json:"tracefs"`
	SockDiag []DiagModule `json:"sock_diag"`
}

// CgroupLayout is how this machine's cgroups are mounted: pure v2, or
// hybrid (v1 controllers beside the v2 hierarchy), and where this process's
// own v2 cgroup is, beneath which sessions' cgroups are made.
type CgroupLayout struct {
	// Layout is "v2" (pure v2), "hybrid", "v1" (no v2 hierarchy: no
	// session can run) or "unknown" (mountinfo could not be read).
	Layout string `json:"layout"`
	// V2 is the cgroup2 mount point.
	V2 string `json:"v2,omitempty"`
	// V1Controllers are the controllers of the v1 hierarchies.
	V1Controllers []string `json:"v1_controllers,omitempty"`
	// Own is this process's v2 cgroup directory (cgroup.OwnDir).
	Own   string `json:"own,omitempty"`
	Error string `json:"error,omitempty"`
}

// Tracefs says where tracefs is mounted. The collector's syscall
// tracepoints need it, and it mounts it at /sys/kernel/tracing itself when
// it is not.
type Tracefs struct {
	Mounted bool     `json:"mounted"`
	Points  []string `json:"points,omitempty"`
}

// DiagModule is one kernel module of the sock_diag family and whether this
// kernel has it.
type DiagModule struct {
	Name string `json:"name"`
	// Present is set when the kernel answers sock_diag for it (loading
	// the module if it is installed and not loaded).
	Present bool `json:"present"`
	// Error says why it is not known.
	Error string `json:"error,omitempty"`
	// Use is what sandtrail needs it for.
	Use string `json:"use"`
}

// diagModules are the sock_diag modules, with what each is for and what to
// ask sock_diag to find it: inet_diag answers only through tcp_diag and
// udp_diag, so it is there when one of them is.
var diagModules = []struct {
	name, use        string
	family, protocol uint8
}{
	{name: "inet_diag", use: "sock_diag of inet sockets, beneath tcp_diag and udp_diag"},
	{name: "tcp_diag", use: "the mirror finds the session of a TCP client", family: diagInet, protocol: diagTCP},
	{name: "udp_diag", use: "the DNS proxy checks which session sent a query", family: diagInet, protocol: diagUDP},
	{name: "unix_diag", use: "sock_diag of unix sockets, for ss -x on a session's sockets", family: diagUnix},
}

// Diagnose probes this machine for `sandtrail doctor`: the kernel
// collector's capabilities (collector.Probe, which needs the privileges
// that loading BPF needs), what require, the list of the policy file
// policy ("" for the embedded default), adds to them, and the cgroups,
// tracefs and sock_diag modules. What it cannot read it reports in the
// Diagnosis; it does not fail.
func Diagnose(policy string, require []string) *Diagnosis {
	d := &Diagnosis{Policy: policy, Require: slices.Clone(require), Unmet: []string{}}
	if d.Require == nil {
		d.Require = []string{}
	}
	k, err := collector.Probe()
	if err != nil {
		d.ProbeError = err.Error()
	} else {
		d.setKernel(k)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		d.Cgroups = CgroupLayout{Layout: "unknown", Error: err.Error()}
	} else {
		own, oerr := cgroup.OwnDir()
		d.Cgroups = cgroupLayout(mi, own, oerr)
		d.Tracefs = Tracefs{Points: mountPoints(mi, "tracefs")}
		d.Tracefs.Mounted = len(d.Tracefs.Points) > 0
	}
	d.SockDiag = sockDiag(sockDiagAnswers)
	return d
}

// setKernel records the probe's account k and what follows from it.
func (d *Diagnosis) setKernel(k *event.Kernel) {
	d.Kernel = k
	d.Unmet = render.Unmet(k, d.Require)
	if d.Unmet == nil {
		d.Unmet = []string{}
	}
	d.Nearest = render.Nearest(k, d.Require)
}

// OK reports whether sandtrail runs here: the kernel was probed and lacks
// nothing that the collector or the policy requires.
func (d *Diagnosis) OK() bool { return d.Kernel != nil && len(d.Unmet) == 0 }

// Verdict is the Diagnosis in a sentence: Nearest, or why the kernel could
// not be probed.
func (d *Diagnosis) Verdict() string {
	if d.Kernel == nil {
		return "cannot tell: " + d.ProbeError
	}
	return d.Nearest
}

// WriteTable writes the Diagnosis for people: the kernel line (as run's
// summary has it), one row per capability, what the policy requires, the
// cgroups, tracefs, the sock_diag modules and the verdict.
func (d *Diagnosis) WriteTable(w io.Writer) error {
	row := func(label, format string, v ...any) {
		fmt.Fprintf(w, "%-10s %s\n", label, fmt.Sprintf(format, v...))
	}
	if d.Kernel == nil {
		row("kernel", "not probed: %s", render.Clean(d.ProbeError, 200))
	} else {
		row("kernel", "%s", render.KernelLine(d.Kernel))
		if err := d.writeCapabilities(w); err != nil {
			return err
		}
	}
	policy := "the embedded default policy"
	if d.Policy != "" {
		policy = render.Clean(d.Policy, 200)
	}
	if len(d.Require) == 0 {
		row("policy", "%s requires nothing more", policy)
	} else {
		row("policy", "%s requires %s", policy, strings.Join(d.Require, ", "))
		if d.Kernel != nil {
			for _, n := range d.Kernel.Missing(d.Require) {
				row("", "missing %s", render.Requirement(d.Kernel, n))
			}
		}
	}
	row("cgroups", "%s", d.Cgroups.describe())
	if d.Tracefs.Mounted {
		row("tracefs", "mounted at %s", strings.Join(d.Tracefs.Points, ", "))
	} else {
		row("tracefs", "not mounted: the collector mounts it at /sys/kernel/tracing when it starts")
	}
	for i, m := range d.SockDiag {
		label := ""
		if i == 0 {
			label = "sock_diag"
		}
		row(label, "%s", m.describe())
	}
	row("verdict", "%s", d.Verdict())
	return nil
}

// writeCapabilities writes one row per capability: its name, whether the
// kernel has it, whether the collector or the policy requires it, the
// Linux that has it and the probe's detail.
func (d *Diagnosis) writeCapabilities(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  capability\thave\trequired\tsince\tdetail\n")
	for _, c := range d.Kernel.Capabilities {
		have, req, since := "no", "", "-"
		if c.Have {
			have = "yes"
		}
		switch {
		case c.Required:
			req = "yes"
		case slices.Contains(d.Require, c.Name):
			req = "policy"
		}
		if c.Since != "" {
			since = "Linux " + render.Clean(c.Since, 16)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", render.Clean(c.Name, 40), have, req, since, render.Clean(c.Detail, 200))
	}
	return tw.Flush()
}

// describe is the layout in a line.
func (c CgroupLayout) describe() string {
	var s string
	switch c.Layout {
	case "v2":
		s = "pure v2 at " + c.V2
	case "hybrid":
		s = fmt.Sprintf("hybrid: v2 at %s, v1 controllers %s", c.V2, strings.Join(c.V1Controllers, ", "))
	case "v1":
		s = "v1 only (controllers " + strings.Join(c.V1Controllers, ", ") + "): sessions need a cgroup2 hierarchy"
	default:
		s = "unknown"
	}
	if c.Own != "" {
		s += "; sessions beneath " + c.Own
	}
	if c.Error != "" {
		s += " (" + c.Error + ")"
	}
	return s
}

// describe is m in a line.
func (m DiagModule) describe() string {
	switch {
	case m.Error != "":
		return fmt.Sprintf("%s unknown (%s): %s", m.Name, m.Error, m.Use)
	case m.Present:
		return fmt.Sprintf("%s present: %s", m.Name, m.Use)
	}
	return fmt.Sprintf("%s missing (modprobe %s): %s", m.Name, m.Name, m.Use)
}

// cgroupLayout reads the layout from mountinfo (/proc/self/mountinfo),
// and this process's own v2 cgroup directory own (or ownErr, why it is not
// known).
func cgroupLayout(mountinfo []byte, own string, ownErr error) CgroupLayout {
	ms, err := cgroup.ParseMountInfo(mountinfo)
	if err != nil {
		return CgroupLayout{Layout: "unknown", Error: err.Error()}
	}
	var l CgroupLayout
	for _, m := range ms {
		switch {
		case m.V2 && l.V2 == "":
			l.V2 = m.Point
		case !m.V2:
			for _, c := range m.Controllers {
				if !strings.HasPrefix(c, "name=") && !slices.Contains(l.V1Controllers, c) {
					l.V1Controllers = append(l.V1Controllers, c)
				}
			}
		}
	}
	slices.Sort(l.V1Controllers)
	switch {
	case l.V2 == "":
		l.Layout = "v1"
	case len(l.V1Controllers) > 0:
		l.Layout = "hybrid"
	default:
		l.Layout = "v2"
	}
	if ownErr != nil {
		l.Error = "this process's v2 cgroup: " + ownErr.Error()
	} else {
		l.Own = own
	}
	return l
}

// mountPoints returns where mountinfo (/proc/self/mountinfo) has file
// systems of type fstype mounted.
func mountPoints(mountinfo []byte, fstype string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, p := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(p) < 1 || p[0] != fstype {
			continue
		}
		out = append(out, strings.ReplaceAll(f[4], `\040`, " "))
	}
	return out
}

// sockDiag says which of diagModules this kernel has, asking ask
// (sockDiagAnswers) about each one's family and protocol.
func sockDiag(ask func(family, protocol uint8) (bool, error)) []DiagModule {
	out := make([]DiagModule, len(diagModules))
	inet := &out[0]
	for i, dm := range diagModules {
		m := &out[i]
		m.Name, m.Use = dm.name, dm.use
		if dm.family == 0 {
			continue
		}
		present, err := ask(dm.family, dm.protocol)
		if err != nil {
			m.Error = err.Error()
			continue
		}
		m.Present = present
		if present && dm.family == diagInet {
			inet.Present = true
		}
	}
	return out
}
