package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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

// The scrape around each phase reads the server's CPU time beside the
// writer's counters (MongoDB: CPU time, no writer), and the CPU table
// divides the phase's CPU seconds by its requests and its duration.
func TestServerCPUPerRequest(t *testing.T) {
	metrics := func(body string) *load {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return &load{t: target{url: srv.URL}, client: srv.Client()}
	}
	l := metrics("# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n" +
		"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n" +
		"msgapi_store_writer_commands_total 10\nmsgapi_store_writer_wait_seconds_total 0.5\nmsgapi_store_writer_busy_seconds_total 1\n")
	a := l.writer(context.Background())
	if !a.ok || !a.cpuOK || a.cpu != 12.5 {
		t.Fatalf("sample %+v: want the writer's counters and cpu 12.5", a)
	}
	mongo := metrics("process_cpu_seconds_total 3\n").writer(context.Background())
	if mongo.ok || !mongo.cpuOK || mongo.cpu != 3 {
		t.Errorf("sample without writer counters %+v: want cpu 3 and no writer", mongo)
	}
	if none := metrics("go_goroutines 7\n").writer(context.Background()); none.cpuOK {
		t.Errorf("sample without process_cpu_seconds_total %+v says it has CPU time", none)
	}

	if !a.selfOK {
		t.Errorf("sample %+v: no CPU time of this process", a)
	}

	a.self, a.selfOK = 1, true
	b := a
	b.cpu = 14.5 // 2 CPU seconds over a 4 s phase of 1,000 requests
	b.self = 2   // and 1 of the generator's
	p := phase{name: "unique send, known lead", requests: 1000}
	p.cpuUse, p.hasCPU = a.cpuTo(b, 4*time.Second)
	var out strings.Builder
	(&report{phases: []phase{p}}).printCPU(&out)
	if want := "| unique send, known lead | 2.00 | 0.50 | 1.00 | 0.25 |"; !strings.Contains(out.String(), want) {
		t.Errorf("CPU table:\n%s\nwant the row %q", out.String(), want)
	}
	b.selfOK = false
	p.cpuUse, p.hasCPU = a.cpuTo(b, 4*time.Second)
	out.Reset()
	(&report{phases: []phase{p}}).printCPU(&out)
	if want := "| unique send, known lead | 2.00 | 0.50 | — | — |"; !strings.Contains(out.String(), want) {
		t.Errorf("CPU table without the generator's CPU:\n%s\nwant the row %q", out.String(), want)
	}
}
