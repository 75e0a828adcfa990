package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// TODO(owner): replaced by the real command.
func newVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "verify", Hidden: true, RunE: func(*cobra.Command, []string) error { return errors.New("verify: not built yet") }}
}
