// Package makefile holds the tests of the repository's Makefile: that
// `make help`, the default target, lists every target the Makefile defines,
// each with its description, and prints no colour codes when its stdout is
// not a terminal. The package has no code of its own.
package makefile
