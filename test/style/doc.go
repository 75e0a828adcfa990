// Package style holds tests of the house style that the compiler does not
// check: no non-test, non-generated Go function of the module spans more
// than 80 lines, counted from its func keyword to its closing brace. The
// package has no code of its own.
package style
