// Package test holds whole-system tests: they build the real msgapi binary,
// start it as a separate process (or two) and talk HTTP to it, with the
// far side of every send counted by a receiver the test runs itself.
package test
