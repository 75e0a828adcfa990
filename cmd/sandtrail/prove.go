package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newProveCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "prove", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("prove: not built yet") }}
}
