//go:build race

package test

// raceEnabled builds the server binary with -race too, which reuses the
// race-instrumented packages the test build already compiled.
const raceEnabled = true
