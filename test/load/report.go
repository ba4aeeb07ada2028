package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// phase is one measured scenario.
type phase struct {
	name     string
	clients  int
	requests int
	elapsed  time.Duration
	took     []time.Duration // sorted
	// roundTrips is the store round trips per request the design states
	// (README, "Round trips per request"); 0 when it states none.
	roundTrips int
	// commands is the store's own count of data commands per request during
	// the phase; NaN where the store does not count.
	commands float64
	kinds    map[string]int // answers by kind
	// The embedded engine's writer during the phase, when msgapi says.
	writerUse writerUse
	hasWriter bool
	cpuUse    cpuUse
	hasCPU    bool
	// eventsLeft were pending at the phase's last answer; the dispatcher
	// had archived them drained later.
	eventsLeft int64
	drained    time.Duration
}

func phaseOf(name string, clients, roundTrips int, answers []answer, elapsed time.Duration, commands float64) phase {
	p := phase{name: name, clients: clients, requests: len(answers), elapsed: elapsed,
		roundTrips: roundTrips, commands: commands, kinds: map[string]int{}}
	for _, a := range answers {
		p.took = append(p.took, a.took)
		switch {
		case a.replayed:
			p.kinds["replayed"]++
		case a.kind != "":
			p.kinds[a.kind]++
		}
	}
	slices.Sort(p.took)
	return p
}

func (p phase) rate() float64 { return float64(p.requests) / p.elapsed.Seconds() }

// percentile is the nearest-rank percentile q (0 < q ≤ 1).
func (p phase) percentile(q float64) time.Duration {
	if len(p.took) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(p.took)))) - 1
	return p.took[max(i, 0)]
}

// report is one run's figures and verdict.
type report struct {
	started  time.Time
	cfg      config
	t        target
	raw      []phase // before and after the scenarios
	phases   []phase
	delivery string
	failures []string
	notes    []string
	// With -grow: the probe on the nearly empty store and at -grow, and
	// the fill between them.
	probes [2]probe
	fill   *phase
}

// tailLimit: a run fails when the unique send's p99 exceeds this many
// times its p50. On the embedded engine SQLite's busy handler once made it
// 34 (p50 34 ms, p99 1.2 s); a first-come, first-served writer keeps it
// near 2. A timed unit test could not say this reliably; a run of this
// tool, with its thousands of requests, can.
const tailLimit = 10

// tailScenario is the scenario the tail rule watches; keyedScenario the
// keyed sends.
const (
	tailScenario  = "unique send, known lead"
	keyedScenario = "unique send with Idempotency-Key"
)

// checkTail applies the tail rule.
func (r *report) checkTail() {
	for _, p := range r.phases {
		if p.name != tailScenario || len(p.took) == 0 {
			continue
		}
		p50, p99 := p.percentile(.50), p.percentile(.99)
		if p99 > tailLimit*p50 {
			r.failures = append(r.failures, fmt.Sprintf("tail: %s p99 %s is %.1f × its p50 %s, over the limit of %d ×", p.name, ms(p99), float64(p99)/float64(p50), ms(p50), tailLimit))
		}
	}
}

func newReport(c config, t target) *report { return &report{started: time.Now(), cfg: c, t: t} }

func (r *report) add(p phase) { r.phases = append(r.phases, p) }

// rawRate is the mean of the raw insert rates: the unit of the ratios.
func (r *report) rawRate() float64 {
	sum := 0.0
	for _, p := range r.raw {
		sum += p.rate()
	}
	return sum / float64(len(r.raw))
}

func (r *report) print(w io.Writer) {
	c := r.cfg
	fmt.Fprintf(w, "\nmsgapi load run, %s\n", r.started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "machine: %d cores%s, %s %s/%s\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if r.t.embedded {
		fmt.Fprintf(w, "server: msgapi built from ./cmd/msgapi, embedded store (FerretDB, SQLite) at %s, webhook SMS provider\n", r.t.storeURI)
		if len(c.serverEnv) > 0 {
			fmt.Fprintf(w, "server environment (-server-env): %s\n", strings.Join(c.serverEnv, " "))
		}
	} else {
		fmt.Fprintf(w, "server: %s, store %s\n", r.t.url, r.t.storeURI)
	}
	fmt.Fprintf(w, "sizes: -c %d -leads %d -unique %d -resends %d -storms %d -storm-size %d (%d storm(s) at a time) -keys %d -replays %d -raw %d\n\n",
		c.clients, c.leads, c.unique, c.resends, c.storms, c.stormSize, stormRunners(c), c.keys, c.replays, c.raw)

	raw := r.rawRate()
	fmt.Fprintln(w, "| scenario | requests | clients | req/s | p50 | p95 | p99 | max | p99 ÷ p50 | × raw | store commands / request | design: round trips → × raw |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	rows := append(append([]phase{r.raw[0]}, r.phases...), r.raw[1])
	for i, p := range rows {
		name := p.name
		switch {
		case i == 0:
			name += " (before)"
		case i == len(rows)-1:
			name += " (after)"
		}
		design, cmds := "—", "—"
		if p.roundTrips > 0 {
			design = fmt.Sprintf("%d → %.2f", p.roundTrips, 1/float64(p.roundTrips))
		}
		if !math.IsNaN(p.commands) {
			cmds = fmt.Sprintf("%.2f", p.commands)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %s | %s | %s | %s | %.1f | %.2f | %s | %s |\n",
			name, p.requests, p.clients, p.rate(), ms(p.percentile(.50)), ms(p.percentile(.95)), ms(p.percentile(.99)), ms(p.percentile(1)),
			float64(p.percentile(.99))/float64(max(p.percentile(.50), 1)), p.rate()/raw, cmds, design)
	}
	before, after := r.raw[0].rate(), r.raw[1].rate()
	fmt.Fprintf(w, "\nraw insert rate: %.0f/s before, %.0f/s after (they differ by %.0f%%); the ratios divide by their mean, %.0f/s\n",
		before, after, 100*math.Abs(before-after)/raw, raw)
	fmt.Fprint(w, "answers:")
	for i, p := range r.phases {
		sep := ";"
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s %s", sep, strings.SplitN(p.name, ":", 2)[0], kindList(p.kinds))
	}
	fmt.Fprintf(w, "\nstore commands / request: data commands (insert, find, update, delete, findAndModify, …) the store served during the phase, by its own serverStatus count\n")
	fmt.Fprintf(w, "tail rule: the run fails when %q has p99 > %d × p50\n", tailScenario, tailLimit)
	for _, n := range r.notes {
		fmt.Fprintln(w, n)
	}
	r.printWriter(w)
	r.printCPU(w)
	r.printTargets(w)
	r.printGrowth(w)
	fmt.Fprintf(w, "deliveries: %s\n", r.delivery)
	if len(r.failures) == 0 {
		fmt.Fprintln(w, "checks: every logical message delivered exactly once; every answer as expected")
		return
	}
	fmt.Fprintf(w, "checks: %d FAILED\n", len(r.failures))
	for i, f := range r.failures {
		if i == 20 {
			fmt.Fprintf(w, "  … and %d more\n", len(r.failures)-20)
			break
		}
		fmt.Fprintln(w, "  "+f)
	}
}

// The targets issue 28 set for this run (16 clients, the embedded engine):
// fewer writes per send. They are printed, not enforced: a ratio to the raw
// insert rate moves with the machine's disk (the review that set them
// measured a raw rate of about 900/s; this machine's is often 2,500/s).
const (
	targetUnique = 0.30 // × raw
	targetKeyed  = 0.20 // × raw
	targetDrain  = 5 * time.Second
	targetTail   = 5.0 // unique p99 ÷ p50
)

func (r *report) printTargets(w io.Writer) {
	raw := r.rawRate()
	fmt.Fprintln(w, "\nevents left at each phase's end, and targets (issue 28):")
	fmt.Fprintln(w, "\n| scenario | events pending at its end | drained in | × raw |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	worst := time.Duration(0)
	for _, p := range r.phases {
		fmt.Fprintf(w, "| %s | %d | %.1f s | %.2f |\n", p.name, p.eventsLeft, p.drained.Seconds(), p.rate()/raw)
		worst = max(worst, p.drained)
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	for _, p := range r.phases {
		switch p.name {
		case tailScenario:
			ratio := float64(p.percentile(.99)) / float64(max(p.percentile(.50), 1))
			fmt.Fprintf(w, "target: unique send ≥ %.2f × raw: %.2f (%s); p99 ≤ %.0f × p50: %.1f (%s)\n",
				targetUnique, p.rate()/raw, met(p.rate()/raw >= targetUnique), targetTail, ratio, met(ratio <= targetTail))
		case keyedScenario:
			fmt.Fprintf(w, "target: keyed send ≥ %.2f × raw: %.2f (%s)\n", targetKeyed, p.rate()/raw, met(p.rate()/raw >= targetKeyed))
		}
	}
	fmt.Fprintf(w, "target: every event backlog drained within %s of its phase's end: the slowest took %.1f s (%s)\n",
		targetDrain, worst.Seconds(), met(worst <= targetDrain))
}

func kindList(kinds map[string]int) string {
	var parts []string
	for _, k := range []string{"sent", "duplicate", "pending", "replayed", "read", "error"} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	if f < 10 {
		return fmt.Sprintf("%.2f ms", f)
	}
	return fmt.Sprintf("%.1f ms", f)
}

// cpuModel is the processor's name where Linux says it, for the record.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return " (" + strings.TrimSpace(v) + ")"
		}
	}
	return ""
}

// printGrowth prints the -grow probes side by side.
func (r *report) printGrowth(w io.Writer) {
	if r.cfg.grow == 0 {
		return
	}
	a, b := r.probes[0], r.probes[1]
	fmt.Fprintf(w, "\nlatency as data grows (-probe %d requests of each kind, one at a time):\n\n", r.cfg.probe)
	fmt.Fprintf(w, "| request | p50 at %d messages | p50 at %d messages | ratio | p99 at %d | p99 at %d |\n", a.stored, b.stored, a.stored, b.stored)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, pair := range [][2]phase{{a.unique, b.unique}, {a.dup, b.dup}, {a.read, b.read}} {
		x, y := pair[0], pair[1]
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %s | %s |\n", x.name, ms(x.percentile(.5)), ms(y.percentile(.5)),
			float64(y.percentile(.5))/float64(max(x.percentile(.5), 1)), ms(x.percentile(.99)), ms(y.percentile(.99)))
	}
	if f := r.fill; f != nil {
		fmt.Fprintf(w, "\n%s: %d requests, %d clients, %.0f/s, p50 %s, p99 %s, max %s\n", f.name, f.requests, f.clients, f.rate(),
			ms(f.percentile(.5)), ms(f.percentile(.99)), ms(f.percentile(1)))
	}
}
