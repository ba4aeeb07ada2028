// Package loki is the Loki shipper: the only code that knows how lines reach
// Loki. It decides that logging never waits for Loki. loki-client-go's
// Handle blocks its caller for as long as Loki is unreachable (unbuffered
// entry channel, retries for minutes) and so does Stop, so the client sits
// behind our own queue, bounded in lines and in bytes and drained by one
// goroutine: a full queue drops its oldest lines (the newest say most about
// the outage) and counts them, each line is capped in length first
// (package logcap), and the final flush on shutdown has a time bound.
// Replacing the client by a plain HTTP push changes this file only. It is a
// package of its own so that importing the event names (package events)
// does not pull in the client's dependencies.
package loki

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	kitlog "github.com/go-kit/kit/log"
	kitlevel "github.com/go-kit/kit/log/level"
	lokiclient "github.com/grafana/loki-client-go/loki"
	"github.com/grafana/loki-client-go/pkg/backoff"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/logcap"
)

// Options configure New.
type Options struct {
	// URL is Loki's push endpoint, e.g. http://loki:3100/loki/api/v1/push.
	URL string
	// App and Env are the constant labels app and env (omitted when empty).
	App, Env string
	// Buffer is how many lines may wait while Loki is slow or down, and
	// BufferBytes how many bytes of lines; past either the oldest lines are
	// dropped and counted. Defaults 10000 and 16 MiB.
	Buffer      int
	BufferBytes int
	// FlushTimeout bounds Close. Default 5 s.
	FlushTimeout time.Duration
	// BatchWait is the longest a line waits in the client's batch. Default 1 s.
	BatchWait time.Duration
	// Log receives the shipper's own diagnostics. It must not write to this
	// Loki writer: a failing push would feed its own queue.
	Log zerolog.Logger
}

// Stats are the shipper's counters since start.
type Stats struct {
	Queued      int    // lines waiting in the queue now
	QueuedBytes int    // their bytes
	Handed      uint64 // lines handed to the client for batching and sending
	Truncated   uint64 // lines cut to logcap's limits before queueing
	QueueFull   uint64 // dropped: the oldest lines, to make room (Loki slow or down)
	Shutdown    uint64 // dropped: still queued when the final flush ran out of time, or written after Close
	PushFailed  uint64 // dropped by the client after its retries
}

// Shipper is an io.Writer for zerolog (zerolog.MultiLevelWriter(stdout, loki)):
// each JSON line becomes one Loki entry labelled app, env, level and event.
// Write never blocks and never fails.
type Shipper struct {
	opts   Options
	client lokiClient
	failed func() uint64 // the client's own count of lines it gave up on

	mu     sync.Mutex // guards closed and the queue
	closed bool
	queue  lineQueue
	wake   chan struct{} // a line was queued (capacity 1: one wake-up pending is enough)
	quit   chan struct{} // closed by Close: hand over what is queued, then stop
	done   chan struct{} // closed when the drainer has handed everything over

	handed, truncated, queueFull, shutdown atomic.Uint64
}

type lokiLine struct {
	t            time.Time
	level, event string
	line         string
}

// lokiClient is what the drainer needs from loki-client-go (tests fake it).
type lokiClient interface {
	Handle(ls model.LabelSet, t time.Time, line string) error
	Stop()
}

// Client retry policy. The defaults (up to 10 retries, backoff to 5 min)
// keep one batch, and so our queue, stuck for 8.5 minutes after Loki comes
// back; these give up on a batch after about 90 s and pick up within 30 s.
var lokiBackoff = backoff.BackoffConfig{MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second, MaxRetries: 8}

// New starts the shipper. Close it to flush on shutdown.
func New(o Options) (*Shipper, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("loki push URL: want http(s)://host[:port]/loki/api/v1/push") // the URL may hold a password
	}
	cfg, err := lokiclient.NewDefaultConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("loki push URL %s: %w", u.Redacted(), err)
	}
	cfg.BackoffConfig = lokiBackoff
	if o.BatchWait > 0 {
		cfg.BatchWait = o.BatchWait
	}
	c, err := lokiclient.NewWithLogger(cfg, kitLogger(o.Log))
	if err != nil {
		return nil, fmt.Errorf("loki client: %w", err)
	}
	return newShipper(o, c, func() uint64 { return clientDropped(u.Host) }), nil
}

// Default queue bounds.
const (
	DefaultBuffer      = 10000
	DefaultBufferBytes = 16 << 20
)

func newShipper(o Options, c lokiClient, failed func() uint64) *Shipper {
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	if o.FlushTimeout <= 0 {
		o.FlushTimeout = 5 * time.Second
	}
	l := &Shipper{
		opts:   o,
		client: c,
		failed: failed,
		queue:  lineQueue{maxLines: o.Buffer, maxBytes: o.BufferBytes},
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go l.drain()
	return l
}

// Write queues one line, capped by logcap. It copies p (zerolog reuses its
// buffer). When the queue is over either bound it drops its oldest lines.
func (l *Shipper) Write(p []byte) (int, error) {
	q, cut := logcap.Line(bytes.TrimRight(p, "\r\n"), logcap.MaxField, logcap.MaxLine)
	if cut {
		l.truncated.Add(1)
	}
	level, event := lineLabels(q) // capped first: a long line is read once, not parsed whole
	e := lokiLine{t: time.Now(), level: level, event: event, line: string(q)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.shutdown.Add(1)
		return len(p), nil
	}
	dropped := l.queue.push(e)
	l.mu.Unlock()
	l.queueFull.Add(uint64(dropped))
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// next takes the oldest queued line.
func (l *Shipper) next() (lokiLine, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queue.pop()
}

// drain is the one goroutine that talks to the client. Handle may block it
// for a long time; meanwhile Write fills the queue and then drops the oldest.
func (l *Shipper) drain() {
	defer close(l.done)
	for {
		if e, ok := l.next(); ok {
			l.push(e)
			continue
		}
		select {
		case <-l.wake:
		case <-l.quit:
			for {
				e, ok := l.next()
				if !ok {
					return
				}
				l.push(e)
			}
		}
	}
}

func (l *Shipper) push(e lokiLine) {
	ls := make(model.LabelSet, 4)
	set := func(k model.LabelName, v string) {
		if v != "" { // Loki treats an empty label as absent: {event=""} selects lines without one
			ls[k] = model.LabelValue(v)
		}
	}
	set("app", l.opts.App)
	set("env", l.opts.Env)
	set("level", e.level)
	set("event", e.event)
	_ = l.client.Handle(ls, e.t, e.line) // it never fails; a batch it gives up on is counted by failed
	l.handed.Add(1)
}

// Close stops accepting lines, hands the queued ones to the client and
// lets it send its last batch, waiting at most FlushTimeout. Lines still
// queued then are dropped and counted; the client's last batch may be lost
// uncounted. Close is safe to call more than once.
func (l *Shipper) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.quit)

	stopped := make(chan struct{})
	go func() {
		<-l.done
		l.client.Stop() // sends the pending batch, with retries
		close(stopped)
	}()
	timer := time.NewTimer(l.opts.FlushTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
		return nil
	case <-timer.C:
	}
	// The drainer is stuck in Handle or the client in its retries; both
	// goroutines end with the process.
	l.mu.Lock()
	lost := uint64(l.queue.clear())
	l.mu.Unlock()
	l.shutdown.Add(lost)
	return fmt.Errorf("loki: final flush did not finish within %s; %d queued lines dropped", l.opts.FlushTimeout, lost)
}

// Stats reads the counters.
func (l *Shipper) Stats() Stats {
	l.mu.Lock()
	queued, queuedBytes := l.queue.len(), l.queue.bytes
	l.mu.Unlock()
	return Stats{
		Queued:      queued,
		QueuedBytes: queuedBytes,
		Handed:      l.handed.Load(),
		Truncated:   l.truncated.Load(),
		QueueFull:   l.queueFull.Load(),
		Shutdown:    l.shutdown.Load(),
		PushFailed:  l.failed(),
	}
}

// lineQueue is a FIFO bounded in lines and in bytes (the lines' text, which
// is what grows). Pushing past either bound drops from the front.
type lineQueue struct {
	maxLines, maxBytes int
	lines              []lokiLine // ring buffer, allocated as it fills
	head, n, bytes     int
}

// push appends e and returns how many of the oldest lines it dropped to
// stay within bounds. A line is at most logcap.MaxLine bytes plus its
// marker, well under any sensible maxBytes; one larger still replaces
// everything queued.
func (q *lineQueue) push(e lokiLine) (dropped int) {
	for q.n > 0 && (q.n >= q.maxLines || q.bytes+len(e.line) > q.maxBytes) {
		q.pop()
		dropped++
	}
	if q.n == len(q.lines) {
		q.grow()
	}
	q.lines[(q.head+q.n)%len(q.lines)] = e
	q.n++
	q.bytes += len(e.line)
	return dropped
}

func (q *lineQueue) pop() (lokiLine, bool) {
	if q.n == 0 {
		return lokiLine{}, false
	}
	e := q.lines[q.head]
	q.lines[q.head] = lokiLine{} // let the text be collected
	q.head = (q.head + 1) % len(q.lines)
	q.n--
	q.bytes -= len(e.line)
	return e, true
}

func (q *lineQueue) grow() {
	size := max(16, 2*len(q.lines))
	size = min(size, q.maxLines)
	lines := make([]lokiLine, size)
	for i := range q.n {
		lines[i] = q.lines[(q.head+i)%len(q.lines)]
	}
	q.lines, q.head = lines, 0
}

func (q *lineQueue) len() int { return q.n }

// clear empties the queue and returns how many lines it held.
func (q *lineQueue) clear() int {
	n := q.n
	q.lines, q.head, q.n, q.bytes = nil, 0, 0, 0
	return n
}

// lineLabels takes level and event from one zerolog JSON line. Values that
// do not look like ours are replaced, so a stray value can never create an
// unbounded number of streams.
func lineLabels(p []byte) (level, event string) {
	var f struct {
		Level string `json:"level"`
		Event string `json:"event"`
	}
	if json.Unmarshal(p, &f) != nil {
		return "", ""
	}
	switch f.Level {
	case "", "trace", "debug", "info", "warn", "error", "fatal", "panic":
		level = f.Level
	default:
		level = "other"
	}
	event = f.Event
	if !labelSafe(event) {
		event = "other"
	}
	return level, event
}

// labelSafe accepts event names shaped like the constants in events.go.
func labelSafe(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// kitLogger routes the client's warnings (failed pushes, retries) to log.
func kitLogger(log zerolog.Logger) kitlog.Logger {
	return kitlevel.NewFilter(kitlog.LoggerFunc(func(kv ...any) error {
		lvl, msg, fields := zerolog.WarnLevel, "", make([]any, 0, len(kv))
		for i := 0; i+1 < len(kv); i += 2 {
			switch k := fmt.Sprint(kv[i]); k {
			case "level":
				if fmt.Sprint(kv[i+1]) == "error" {
					lvl = zerolog.ErrorLevel
				}
			case "msg":
				msg = fmt.Sprint(kv[i+1])
			case "component": // ours says more
			default:
				fields = append(fields, k, fmt.Sprint(kv[i+1]))
			}
		}
		log.WithLevel(lvl).Str("component", "loki-client").Fields(fields).Msg(msg)
		return nil
	}), kitlevel.AllowWarn())
}

// clientDropped reads the count of lines the client gave up on after its
// retries: it reports them only through its own metric, which its init
// registers on Prometheus' default registry.
func clientDropped(host string) uint64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil && len(mfs) == 0 {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != "promtail_dropped_entries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == lokiclient.HostLabel && lp.GetValue() == host {
					return uint64(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}
