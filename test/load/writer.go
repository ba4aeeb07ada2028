package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The embedded engine's writer queue, read from msgapi's /metrics around
// each scenario (msgapi_store_writer_*): how many write commands each
// request cost, how long they queued and held the writer, and how busy the
// writer was. It says where a write-bound scenario's time goes. The same
// scrape reads the server's own CPU time (process_cpu_seconds_total): on
// two shared cores a request's cost is CPU as much as writes, and CPU
// seconds per request vary far less between runs than requests a second.

type writerSample struct {
	commands, wait, busy float64
	ok                   bool
	cpu                  float64 // the server process's CPU seconds
	cpuOK                bool
	self                 float64 // this process's (the generator's) CPU seconds
	selfOK               bool
}

// cpuUse is the server's CPU time during one phase, and the generator's.
type cpuUse struct {
	seconds float64
	self    float64
	selfOK  bool
	elapsed time.Duration
}

func (a writerSample) cpuTo(b writerSample, elapsed time.Duration) (cpuUse, bool) {
	if !a.cpuOK || !b.cpuOK {
		return cpuUse{}, false
	}
	u := cpuUse{seconds: b.cpu - a.cpu, elapsed: elapsed}
	if a.selfOK && b.selfOK {
		u.self, u.selfOK = b.self-a.self, true
	}
	return u, true
}

// writerUse is the writer's work during one phase.
type writerUse struct {
	commands, wait, busy float64
	elapsed              time.Duration
}

func (a writerSample) to(b writerSample, elapsed time.Duration) (writerUse, bool) {
	if !a.ok || !b.ok {
		return writerUse{}, false
	}
	return writerUse{commands: b.commands - a.commands, wait: b.wait - a.wait, busy: b.busy - a.busy, elapsed: elapsed}, true
}

// writer reads the three counters and the CPU time; ok is false when the
// server has no writer counters (MongoDB) or /metrics does not answer, cpuOK
// when it has no CPU time (a platform without it) or does not answer.
func (l *load) writer(ctx context.Context) writerSample {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.t.url+"/metrics", nil)
	res, err := l.client.Do(req)
	if err != nil {
		return writerSample{}
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return writerSample{}
	}
	var s writerSample
	found := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "msgapi_store_writer_commands_total":
			dst = &s.commands
		case "msgapi_store_writer_wait_seconds_total":
			dst = &s.wait
		case "msgapi_store_writer_busy_seconds_total":
			dst = &s.busy
		case "process_cpu_seconds_total":
			if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
				s.cpu, s.cpuOK = v, true
			}
			continue
		default:
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			*dst = v
			found++
		}
	}
	s.ok = sc.Err() == nil && found == 3
	s.cpuOK = s.cpuOK && sc.Err() == nil
	s.self, s.selfOK = selfCPU()
	return s
}

// printWriter prints the writer's work per phase.
func (r *report) printWriter(w io.Writer) {
	rows := r.phasesWhere(func(p phase) bool { return p.hasWriter })
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, "\nthe embedded engine's writer during each scenario (msgapi's /metrics):\n\n")
	fmt.Fprintln(w, "| scenario | write commands / request | mean queue wait | mean hold (writer busy per command) | writer busy |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, p := range rows {
		u := p.writerUse
		if u.commands == 0 {
			fmt.Fprintf(w, "| %s | 0 | — | — | %.0f %% |\n", p.name, 100*u.busy/u.elapsed.Seconds())
			continue
		}
		fmt.Fprintf(w, "| %s | %.2f | %s | %s | %.0f %% |\n", p.name, u.commands/float64(p.requests),
			ms(time.Duration(u.wait/u.commands*float64(time.Second))), ms(time.Duration(u.busy/u.commands*float64(time.Second))),
			100*u.busy/u.elapsed.Seconds())
	}
}

// printCPU prints the server's CPU time per phase, per request and as the
// cores it kept busy (the embedded engine runs inside the server's process,
// so its share is in these figures), and the generator's own beside it.
func (r *report) printCPU(w io.Writer) {
	rows := r.phasesWhere(func(p phase) bool { return p.hasCPU })
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, "\nCPU time during each scenario: msgapi's (its process_cpu_seconds_total; the embedded engine included) and this generator's (its receiver included):\n\n")
	fmt.Fprintln(w, "| scenario | msgapi CPU ms / request | msgapi cores busy | generator CPU ms / request | generator cores busy |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, p := range rows {
		u := p.cpuUse
		per := func(sec float64) float64 { return 1000 * sec / float64(max(p.requests, 1)) }
		gen, genCores := "—", "—"
		if u.selfOK {
			gen, genCores = fmt.Sprintf("%.2f", per(u.self)), fmt.Sprintf("%.2f", u.self/u.elapsed.Seconds())
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s | %s |\n", p.name, per(u.seconds), u.seconds/u.elapsed.Seconds(), gen, genCores)
	}
}

// phasesWhere returns the phases keep accepts, in order.
func (r *report) phasesWhere(keep func(phase) bool) []phase {
	var rows []phase
	for _, p := range r.phases {
		if keep(p) {
			rows = append(rows, p)
		}
	}
	return rows
}
