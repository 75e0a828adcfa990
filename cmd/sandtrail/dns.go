package main

import (
	"github.com/spf13/cobra"
)

// addDNSFlags adds the DNS proxy's flags to a command that hosts sessions
// (run, daemon); bindDNSFlags binds them when that command runs, because
// both commands bind the same keys.
func addDNSFlags(cmd *cobra.Command) {
	cmd.Flags().StringSlice("dns-upstream", nil,
		"resolvers the DNS proxy forwards the sessions' lookups to, IP[:PORT], comma-separated (config dns.upstream, env SANDTRAIL_DNS_UPSTREAM; default: the nameservers of /etc/resolv.conf)")
}

func bindDNSFlags(g *globals, cmd *cobra.Command) {
	g.bindFlag("dns.upstream", cmd.Flags().Lookup("dns-upstream"))
}
