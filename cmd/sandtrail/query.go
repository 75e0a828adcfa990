package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newQueryCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "query", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("query: not built yet") }}
}
