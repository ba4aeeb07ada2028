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
// writer was. It says where a write-bound scenario's time goes.

type writerSample struct {
	commands, wait, busy float64
	ok                   bool
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

// writer reads the three counters; ok is false when the server has none
// (MongoDB) or /metrics does not answer.
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
		default:
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			*dst = v
			found++
		}
	}
	s.ok = sc.Err() == nil && found == 3
	return s
}

// printWriter prints the writer's work per phase.
func (r *report) printWriter(w io.Writer) {
	var rows []phase
	for _, p := range r.phases {
		if p.hasWriter {
			rows = append(rows, p)
		}
	}
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
