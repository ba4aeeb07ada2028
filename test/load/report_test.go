package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tail rule: a unique send whose p99 exceeds 10 × its p50 fails the
// run; other scenarios, and a tail within the limit, do not.
func TestTailRule(t *testing.T) {
	phaseWith := func(name string, p50, p99 time.Duration) phase {
		var as []answer
		for range 98 {
			as = append(as, answer{took: p50})
		}
		as = append(as, answer{took: p99}, answer{took: p99})
		return phaseOf(name, 16, 5, as, time.Second, 0)
	}
	for _, tc := range []struct {
		name     string
		phase    phase
		failures int
	}{
		{"flat", phaseWith(tailScenario, 20*time.Millisecond, 60*time.Millisecond), 0},
		{"at the limit", phaseWith(tailScenario, 20*time.Millisecond, 200*time.Millisecond), 0},
		{"over the limit", phaseWith(tailScenario, 20*time.Millisecond, 201*time.Millisecond), 1},
		{"busy-handler tail", phaseWith(tailScenario, 34*time.Millisecond, 1200*time.Millisecond), 1},
		{"another scenario", phaseWith("resend: duplicate, original written", 20*time.Millisecond, time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &report{phases: []phase{tc.phase}}
			r.checkTail()
			if len(r.failures) != tc.failures {
				t.Fatalf("failures %q, want %d", r.failures, tc.failures)
			}
			if tc.failures > 0 && !strings.Contains(r.failures[0], "p99") {
				t.Errorf("failure %q does not say what failed", r.failures[0])
			}
		})
	}
}

// -server-env takes NAME=VALUE pairs for the server this tool starts, and
// nothing else.
func TestServerEnvFlag(t *testing.T) {
	c, err := parseFlags([]string{"-server-env", "GOGC=400", "-server-env", "GOMEMLIMIT=1GiB"}, io.Discard)
	if err != nil || !slices.Equal(c.serverEnv, []string{"GOGC=400", "GOMEMLIMIT=1GiB"}) {
		t.Errorf("serverEnv %q, %v; want both, in order", c.serverEnv, err)
	}
	for _, bad := range [][]string{
		{"-server-env", "GOGC"},
		{"-server-env", "=400"},
		{"-server-env", "GOGC=400", "-url", "http://127.0.0.1:8080", "-key", "k", "-store-uri", "mongodb://x/", "-webhook-secret", "s", "-receiver-addr", "127.0.0.1:9000"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
