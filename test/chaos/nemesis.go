package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// Fault kinds, in the order the table prints them.
const (
	FKill     = "SIGKILL + restart"
	FEngine   = "engine host restart (process 0)"
	FPause    = "SIGSTOP past the lease"
	FLongStop = "SIGSTOP past the key lease"
	FClock    = "clock offset > lease (restart)"
	FSlow     = "provider slow"
	F4xx      = "provider 4xx"
	F5xx      = "provider 5xx"
	FHang     = "provider past send timeout"
)

var faultKinds = []string{FKill, FEngine, FPause, FLongStop, FClock, FSlow, F4xx, F5xx, FHang}

// faultFlags are the short names -faults takes.
var faultFlags = map[string]string{
	"kill": FKill, "engine": FEngine, "pause": FPause, "longstop": FLongStop, "clock": FClock,
	"slow": FSlow, "4xx": F4xx, "5xx": F5xx, "hang": FHang,
}

// processWeights: how often each process fault is drawn, relative.
var processWeights = []struct {
	kind   string
	weight int
}{{FKill, 6}, {FEngine, 2}, {FPause, 5}, {FLongStop, 1}, {FClock, 6}}

// Largest clock offset: more than the lease; one process at a time.
const maxClockOffset = 4 * time.Second

// nemesis injects faults on a seeded schedule until end: one goroutine for
// the processes, one for the provider.
type nemesis struct {
	c   *cluster
	rcv *receiver
	log io.Writer

	enabled map[string]bool

	mu     sync.Mutex
	counts map[string]int
	skewed *proc // the process running with a clock offset
}

func (n *nemesis) note(kind, format string, args ...any) {
	n.mu.Lock()
	n.counts[kind]++
	n.mu.Unlock()
	fmt.Fprintf(n.log, "%s %-32s %s\n", time.Now().Format("15:04:05.000"), kind, fmt.Sprintf(format, args...))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// processes kills, pauses, skews and restarts processes until end.
func (n *nemesis) processes(ctx context.Context, rng *rand.Rand, end time.Time) error {
	procs := n.c.procs
	other := func() *proc { // not the engine's host, when there is another
		if len(procs) == 1 {
			return procs[0]
		}
		return procs[1+rng.IntN(len(procs)-1)]
	}
	var kinds []string
	for _, w := range processWeights {
		for range w.weight {
			if n.enabled[w.kind] {
				kinds = append(kinds, w.kind)
			}
		}
	}
	if len(kinds) == 0 {
		return nil
	}
	for sleepCtx(ctx, between(rng, time.Second, 3*time.Second)) && time.Now().Before(end) {
		switch kind := kinds[rng.IntN(len(kinds))]; kind {
		case FKill, FEngine:
			p := procs[0]
			if kind == FKill {
				p = other()
			}
			if p.i == 0 {
				kind = FEngine // one process: it is the engine's host
			}
			n.c.kill(p)
			n.note(kind, "process %d", p.i)
			sleepCtx(ctx, between(rng, 200*time.Millisecond, 1500*time.Millisecond))
			if err := n.c.start(ctx, p, p.offset); err != nil {
				return err
			}
		case FPause, FLongStop:
			p := procs[rng.IntN(len(procs))]
			d := between(rng, dedupLease+500*time.Millisecond, 3*time.Second)
			if kind == FLongStop {
				d = keyLease + time.Second
			}
			if n.c.pause(p) {
				n.note(kind, "process %d for %s", p.i, d)
				sleepCtx(ctx, d)
				n.c.resume(p)
			}
		default:
			p := other()
			off := between(rng, dedupLease+time.Second, maxClockOffset)
			if rng.IntN(2) == 0 {
				off = -off
			}
			if prev := n.skewed; prev != nil && prev != p { // one skewed process at a time
				n.c.kill(prev)
				if err := n.c.start(ctx, prev, 0); err != nil {
					return err
				}
			}
			n.c.kill(p)
			n.note(FClock, "process %d restarted %+v off", p.i, off)
			if err := n.c.start(ctx, p, off); err != nil {
				return err
			}
			n.skewed = p
		}
	}
	return nil
}

// provider switches the receiver between modes until end.
func (n *nemesis) provider(ctx context.Context, rng *rand.Rand, end time.Time) {
	var modes []struct{ mode, kind string }
	for _, m := range []struct{ mode, kind string }{{modeSlow, FSlow}, {mode4xx, F4xx}, {mode5xx, F5xx}, {modeHang, FHang}} {
		if n.enabled[m.kind] {
			modes = append(modes, m)
		}
	}
	if len(modes) == 0 {
		return
	}
	for sleepCtx(ctx, between(rng, 2*time.Second, 6*time.Second)) && time.Now().Before(end) {
		m := modes[rng.IntN(len(modes))]
		d := between(rng, time.Second, 4*time.Second)
		n.note(m.kind, "for %s", d)
		n.rcv.setMode(m.mode)
		sleepCtx(ctx, d)
		n.rcv.setMode(modeOK)
	}
}
