// Command chaos proves msgapi's promise — one text, one send; nothing
// acknowledged is lost — under random faults, the way Jepsen checks a
// database: it records the whole history of a run (every request and its
// answer, every provider call) and judges it afterwards.
//
//	go run ./test/chaos -duration 60s          # about two minutes in all
//	go run ./test/chaos -seed 7 -duration 10m
//	go run ./test/chaos -unfenced              # the fence off: must find double sends
//
// It builds ./cmd/msgapi once (or takes -bin) and starts -processes of it on
// one store: process 0 runs the embedded engine on a loopback port
// (MSGAPI_EMBEDDED_ADDR), the others attach with MONGODB_URI. The SMS
// provider is the signed webhook, aimed at a receiver of its own that
// records every call (and checks its signature in either scheme msgapi
// signs with: X-Msgapi-Signature or Standard Webhooks v1). Windows are
// short: dedup window 45 s, dedup lease 1 s, dedup wait 1 s, send timeout
// 2 s, store call timeout 1 s, key lease and shutdown 20 s, outcome sweep
// every 1 s after 3 s.
//
// # The workload
//
// -clients clients each send one logical message (a new text to one of
// their 8 recipients) after another, 40% of them under an Idempotency-Key.
// Each is sent by 1–3 concurrent callers, some released together, some up
// to 1.5 s apart; a caller retries after a timeout (3 s), a 5xx, a 409 or
// a pending answer (after its Retry-After), half the time through another
// process, until it gets a finished answer; a caller whose text failed at
// the provider sometimes sends it again. Without a key every request of a
// logical message starts within 8 s of its first; under a key callers
// retry for up to 24 s, and once more 47 s after the first request, past
// the dedup window, where only the key stands between the text and a
// second send.
//
// # The nemesis
//
// On a schedule drawn from -seed, one goroutine SIGKILLs and restarts a
// process, SIGKILLs and restarts process 0 (the embedded engine's host:
// every other process's store calls fail until it is back), SIGSTOPs a
// process for longer than the dedup lease (sometimes longer than the key
// lease) and SIGCONTs it, or restarts one process with its clock shifted by
// 2–4 s either way (MSGAPI_TEST_CLOCK_OFFSET, more than the lease; one
// process at a time); another makes the provider slow, refuse (422), fail
// (503) or hang past the send timeout for a few seconds. The schedule is
// the seed's; timing on a loaded machine is not, so a seed replays the same
// faults, not the same interleavings.
//
// # The checker
//
// After the load ends, the faults stop (every process running, none
// paused, the provider healthy), the late retries are done, and a quiet
// period passes (the key lease plus the sweeper's delay) every message any
// answer named or any provider call carried is read back with GET
// /api/messages/{id}. Then, over the whole history:
//
//   - text sent twice in its window: a logical message without a key had
//     more than one provider call that may have reached the person. Every
//     call counts except one the provider refused with a 4xx: a 5xx or a
//     timeout is ambiguous (msgapi records unknown) and counts as a
//     delivery. A call after a 4xx refusal is a legitimate second try of a
//     text that reached no one, not a second delivery. All requests of such
//     a logical message start within 8 s of the first; a server-side stall
//     adds at most 21 s and clock offsets at most 8 s, so every one of
//     them falls within the 45 s dedup window of the first, which is what
//     lets the checker count per logical message without timestamps.
//   - Idempotency-Key sent twice: a logical message under a key had more
//     than one provider call of any kind, ever (a key answers from its
//     first message for its whole life, a refused one included).
//   - one message id sent twice: two provider calls carried one message id.
//   - answered sent, not delivered exactly once: an answer (send, duplicate
//     or replay) said the message's status was sent, and there was not
//     exactly one call for that id, answered 2xx by the provider (a hang
//     answers 2xx after the send timeout: a process stalled past its own
//     timer may still read it, and rightly says sent).
//   - acknowledged message lost: a message some 2xx answer named is 404 or
//     cannot be read.
//   - message not final: a message is still sending after the quiet period.
//   - status contradicts the provider: the provider accepted a call, and
//     the message says it reached no one (failed, undelivered).
//   - delivered without a message: a provider call's message id is 404 (a
//     send without its commit point).
//   - Idempotency-Key replay differs: a finished 2xx answer under a key is
//     not byte for byte (status code and body) the first finished answer
//     the clients got under it. Pending answers and 409s are not finished.
//   - delivery with a bad signature.
//
// It prints a table — logical messages, requests, faults by kind,
// deliveries, final states, violations by kind, the seed — and exits 1 on
// any violation, naming the seed. With -unfenced every process runs with
// MSGAPI_TEST_UNFENCED=1 and the run must find violations: exit 1 when it
// finds none (the faults did not bite).
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
		os.Exit(1)
	}
}

type config struct {
	processes, clients int
	duration, timeout  time.Duration
	seed               uint64
	unfenced, keep     bool
	bin, onStoreError  string
	faults             map[string]bool // enabled fault kinds
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.processes, "processes", 3, "msgapi processes on one store")
	fs.IntVar(&c.clients, "clients", 24, "concurrent clients")
	fs.DurationVar(&c.duration, "duration", time.Minute, "how long clients start new messages and the nemesis injects faults")
	fs.DurationVar(&c.timeout, "timeout", 0, "bound on the whole run (default: duration + 5m)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the workload and the fault schedule (default: random, printed)")
	fs.BoolVar(&c.unfenced, "unfenced", false, "run msgapi with MSGAPI_TEST_UNFENCED=1 and expect violations")
	fs.BoolVar(&c.keep, "keep", false, "keep the run's folder (logs, data, fault log)")
	fs.StringVar(&c.onStoreError, "on-store-error", "refuse", "MSGAPI_DEDUP_ON_STORE_ERROR of the processes: refuse, or send (its unguarded double sends are reported as excused)")
	fs.StringVar(&c.bin, "bin", "", "a built msgapi binary (default: go build ./cmd/msgapi)")
	faults := fs.String("faults", "all", "comma-separated fault kinds to inject: all, none, or of kill, engine, pause, longstop, clock, slow, 4xx, 5xx, hang")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.faults = map[string]bool{}
	for _, f := range strings.Split(*faults, ",") {
		switch f = strings.TrimSpace(f); {
		case f == "all":
			for _, k := range faultKinds {
				c.faults[k] = true
			}
		case f == "none":
		case faultFlags[f] != "":
			c.faults[faultFlags[f]] = true
		default:
			return c, fmt.Errorf("-faults: unknown fault %q", f)
		}
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.processes < 1 || c.clients < 1 || c.clients > 99:
		return c, errors.New("-processes must be at least 1, -clients between 1 and 99")
	case c.onStoreError != "refuse" && c.onStoreError != "send":
		return c, errors.New("-on-store-error must be refuse or send")
	case c.duration < 5*time.Second:
		return c, errors.New("-duration must be at least 5s")
	}
	if c.timeout == 0 {
		c.timeout = c.duration + 5*time.Minute
	}
	if c.seed == 0 {
		c.seed = mrand.Uint64()%1_000_000 + 1
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "msgapi-chaos-")
	if err != nil {
		return err
	}
	keep := cfg.keep // also kept when a violation needs its logs
	defer func() {
		if keep {
			fmt.Fprintf(stdout, "run folder kept (process logs, fault log): %s\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	bin := cfg.bin
	if bin == "" {
		start := time.Now()
		if bin, err = buildBinary(ctx, dir); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "built ./cmd/msgapi in %s\n", time.Since(start).Round(100*time.Millisecond))
	}
	// A Standard Webhooks secret; the receiver also verifies the legacy
	// X-Msgapi-Signature, which msgapi sends with non-whsec_ secrets.
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(randomHex(12)))
	rcv, err := startReceiver(secret, sendTimeout)
	if err != nil {
		return err
	}
	defer rcv.close()
	c, err := newCluster(ctx, dir, bin, cfg.processes, rcv.url(), secret, cfg.unfenced, cfg.onStoreError)
	if err != nil {
		return err
	}
	defer c.stopAll()
	fmt.Fprintf(stdout, "seed %d: %d processes on store %s, %d clients, %s of faults%s\n",
		cfg.seed, cfg.processes, c.storeAddr, cfg.clients, cfg.duration, map[bool]string{true: ", FENCE OFF"}[cfg.unfenced])

	faultLog, err := os.Create(filepath.Join(dir, "faults.log"))
	if err != nil {
		return err
	}
	defer faultLog.Close()
	c.faultLog = faultLog
	started := time.Now()
	rec := &recorder{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4 * cfg.clients
	w := &workload{c: c, http: &http.Client{Transport: tr}, rec: rec, runID: fmt.Sprintf("%d-%s", cfg.seed, randomHex(3)), loadEnd: started.Add(cfg.duration)}
	n := &nemesis{c: c, rcv: rcv, log: faultLog, enabled: cfg.faults, counts: map[string]int{}}

	seeds := mrand.New(mrand.NewPCG(cfg.seed, 0x636861_6f73))
	var wg sync.WaitGroup
	for i := range cfg.clients {
		rng := mrand.New(mrand.NewPCG(seeds.Uint64(), uint64(i)))
		wg.Go(func() { w.client(ctx, i, rng) })
	}
	var nemErr error
	prng, vrng := mrand.New(mrand.NewPCG(seeds.Uint64(), 1)), mrand.New(mrand.NewPCG(seeds.Uint64(), 2))
	var nwg sync.WaitGroup
	nwg.Go(func() { nemErr = n.processes(ctx, prng, w.loadEnd) })
	nwg.Go(func() { n.provider(ctx, vrng, w.loadEnd) })
	nwg.Wait()
	if nemErr != nil {
		return fmt.Errorf("nemesis: %w", nemErr)
	}
	for _, p := range c.procs { // heal
		c.resume(p)
	}
	rcv.setMode(modeOK)
	wg.Wait()
	w.late.Wait()
	fmt.Fprintf(stdout, "load done after %s; quiet period …\n", time.Since(started).Round(time.Second))
	quiet := keyLease + outcomeAfter + 2*sweepEvery
	if !sleepCtx(ctx, quiet) {
		return ctx.Err()
	}

	h := History{Logical: rec.logical, Requests: rec.requests}
	ids := map[string]bool{}
	for _, q := range h.Requests {
		if q.MessageID != "" {
			ids[q.MessageID] = true
		}
	}
	h.Deliveries, h.BadSig = rcv.deliveries()
	for _, d := range h.Deliveries {
		ids[d.MessageID] = true
	}
	h.ReadBack = w.readBack(ctx, sortedKeys(ids))
	if err := ctx.Err(); err != nil {
		return err
	}
	serverEvents, unguarded, err := c.scanLogs()
	if err != nil {
		return err
	}
	if cfg.onStoreError == "send" { // refuse sends nothing unguarded: nothing to excuse
		h.Unguarded = unguarded
	}
	vs, excused := Check(h)
	keep = keep || len(vs) > 0
	n.counts["msgapi start-up failed (retried)"] = c.startFailures
	report(stdout, cfg, h, n.counts, serverEvents, vs, excused, time.Since(started))

	switch {
	case cfg.unfenced && len(vs) == 0:
		return fmt.Errorf("seed %d: the fence was off and no violation was found: the faults did not bite", cfg.seed)
	case cfg.unfenced:
		fmt.Fprintf(stdout, "fence off: %d violation(s) found, as expected\n", len(vs))
		return nil
	case len(vs) > 0:
		return fmt.Errorf("%d violation(s); replay the schedule with -seed %d", len(vs), cfg.seed)
	}
	return nil
}

func report(out io.Writer, cfg config, h History, faults, serverEvents map[string]int, vs, excused []Violation, took time.Duration) {
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "  %s\t%v\n", k, v) }
	fmt.Fprintf(tw, "seed %d, %s of faults, %d processes, %d clients, fence %s, on store error %s, run %s\n", cfg.seed, cfg.duration, cfg.processes, cfg.clients,
		map[bool]string{false: "on", true: "OFF"}[cfg.unfenced], cfg.onStoreError, took.Round(time.Second))

	keyed := 0
	for _, l := range h.Logical {
		if l.Key != "" {
			keyed++
		}
	}
	fmt.Fprintln(tw, "logical messages")
	row("total", len(h.Logical))
	row("under an Idempotency-Key", keyed)

	var finished, pending, conflict, c5xx, c4xx, none int
	for _, q := range h.Requests {
		switch {
		case q.answered():
			finished++
		case q.Pending:
			pending++
		case q.Code == http.StatusConflict:
			conflict++
		case q.Code >= 500:
			c5xx++
		case q.Code >= 400:
			c4xx++
		case q.Code == 0:
			none++
		}
	}
	fmt.Fprintln(tw, "requests")
	row("total", len(h.Requests))
	row("finished 2xx", finished)
	row("pending (retried)", pending)
	row("409 key in progress", conflict)
	row("5xx", c5xx)
	row("other 4xx", c4xx)
	row("no answer (timeout, refused)", none)

	fmt.Fprintln(tw, "faults")
	total := 0
	for _, k := range faultKinds {
		if !cfg.faults[k] {
			row(k, "off")
			continue
		}
		row(k, faults[k])
		total += faults[k]
	}
	row("total", total)
	row("msgapi start-up failed (retried)", faults["msgapi start-up failed (retried)"])

	outcomes := map[string]int{}
	for _, d := range h.Deliveries {
		outcomes[d.Outcome]++
	}
	fmt.Fprintln(tw, "provider calls (deliveries)")
	for _, k := range []string{modeOK, modeSlow, modeHang, mode5xx, mode4xx} {
		row(k, outcomes[k])
	}
	row("total", len(h.Deliveries))

	states := map[string]int{}
	for _, rb := range h.ReadBack {
		switch {
		case rb.Err != "":
			states["unreadable"]++
		case !rb.Found:
			states["404"]++
		default:
			states[rb.Status]++
		}
	}
	fmt.Fprintln(tw, "messages read back")
	for _, k := range sortedKeys(states) {
		row(k, states[k])
	}

	fmt.Fprintln(tw, "server events, warn and above (what the faults did inside msgapi)")
	for _, k := range sortedKeys(serverEvents) {
		row(k, serverEvents[k])
	}

	byKind := map[string]int{}
	for _, v := range vs {
		byKind[v.Kind]++
	}
	fmt.Fprintln(tw, "violations")
	for _, k := range violationKinds {
		row(k, byKind[k])
	}
	row("total", len(vs))
	row("excused: "+Excused, len(excused))
	row("unguarded sends (lock not written)", len(h.Unguarded))
	tw.Flush()
	for i, v := range excused {
		if i == 5 {
			break
		}
		fmt.Fprintf(out, "  excused: %s\n", v.Detail)
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].Kind < vs[j].Kind })
	for i, v := range vs {
		if i == 20 {
			fmt.Fprintf(out, "  … and %d more\n", len(vs)-20)
			break
		}
		fmt.Fprintf(out, "  %s: %s\n", v.Kind, v.Detail)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand docs)
	return hex.EncodeToString(b)
}
