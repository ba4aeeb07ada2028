// Package metrics is msgapi's Prometheus surface, served at GET /metrics.
//
// It decides what is counted and how it is labelled. Labels are bounded by
// construction: the method is one of a fixed set or "other", the route is
// echo's template (c.Path(), never the raw URL; "unmatched" when no route
// matched), statuses, channels, modes, event names and store command names come from
// msgapi's own code. Everything lives on its own prometheus.Registry (no
// globals), so two servers in one test process never collide.
//
// Sources: an echo middleware (requests, latency), the send path through
// send.Metrics (sends, duplicates), the store's round-trip monitor
// (store.Counter.Observe), the log stream itself (Events: one counter per
// event name, which is how guard errors and Idempotency-Key replays and
// conflicts are counted without those packages knowing about metrics), and
// the Loki shipper's counters (WatchLoki).
package metrics

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/events/loki"
)

// Metrics holds every collector msgapi exports.
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	sends       *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	idempotency *prometheus.CounterVec
	events      *prometheus.CounterVec
	store       *prometheus.HistogramVec
	loki        *lokiCollector
	lost        prometheus.Counter
	eventNames  *labelSet
	rateLimited *prometheus.CounterVec
	webhooks    *prometheus.CounterVec
	webhookDur  prometheus.Histogram
	backlog     *prometheus.GaugeVec
	consent     *prometheus.CounterVec
	suppressed  *prometheus.CounterVec

	// pendingByWorkspace: duplicate_pending events per workspace (the
	// operator's "pending flood" alert); it and rateLimited share the
	// bounded set of workspace labels.
	pendingByWorkspace *prometheus.CounterVec
	workspaces         *labelSet
}

// Option configures New.
type Option func(*options)

type options struct{ slowestRequest time.Duration }

// SlowestRequest is the longest a request can legitimately take (the send
// timeout plus the duplicate guard's wait): the latency buckets reach at
// least twice past it, so the slowest requests land in a bucket of their
// own instead of +Inf.
func SlowestRequest(d time.Duration) Option { return func(o *options) { o.slowestRequest = d } }

// latencyBuckets are the HTTP latency buckets: fine below a second, then
// up to 60 s, then doubling until twice the slowest request is covered.
func latencyBuckets(slowest time.Duration) []float64 {
	b := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 20, 30, 60}
	for b[len(b)-1] < 2*slowest.Seconds() {
		b = append(b, 2*b[len(b)-1])
	}
	return b
}

// New registers msgapi's collectors, plus the Go runtime and process
// collectors, on a fresh registry.
func New(opts ...Option) *Metrics {
	var o options
	for _, f := range opts {
		f(&o)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_http_requests_total",
			Help: "HTTP requests by method, route template and status code.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "msgapi_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route template, including the problem document on errors.",
			Buckets: latencyBuckets(o.slowestRequest),
		}, []string{"method", "route"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_sends_total",
			Help: "Messages handed to a sender, by channel and outcome (the message status: sent, failed, ...).",
		}, []string{"channel", "outcome"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_duplicates_total",
			Help: "Sends the duplicate guard stopped, by mode (lock_resolved, lock_resolved_polled, pending).",
		}, []string{"mode"}),
		idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_idempotency_requests_total",
			Help: "Requests with an Idempotency-Key, by outcome, as reported by the idempotency package.",
		}, []string{"outcome"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "msgapi_outcomes_lost_total",
			Help: "Messages still sending long after the send timeout (their process ended during the provider call), marked unknown by the outcome sweeper.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_events_total",
			Help: "Event lines logged, by event name (only lines at or above the log level).",
		}, []string{"event"}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "msgapi_store_command_duration_seconds",
			Help:    "Store round trips (MongoDB commands) and their latency, by command name.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 15), // 0.25 ms .. 4 s
		}, []string{"command"}),
		eventNames: &labelSet{max: maxEventNames, seen: map[string]bool{}},
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_rate_limited_total",
			Help: "Requests refused with 429 because their workspace was over its rate limit, by route template and workspace; past 1000 workspaces the rest share workspace_id=\"other\".",
		}, []string{"route", "workspace_id"}),
		pendingByWorkspace: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_duplicate_pending_total",
			Help: "Duplicates answered \"still in flight\" (message.api.duplicate_pending) by workspace; past 1000 workspaces the rest share workspace_id=\"other\".",
		}, []string{"workspace_id"}),
		workspaces: &labelSet{max: maxWorkspaceLabels, seen: map[string]bool{}},
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_webhook_attempts_total",
			Help: "Event webhook delivery attempts, by outcome (succeeded, failed).",
		}, []string{"outcome"}),
		webhookDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "msgapi_webhook_attempt_duration_seconds",
			Help:    "Event webhook delivery attempt latency (the endpoint's answer, or the timeout).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "msgapi_webhook_backlog",
			Help: "Event webhook backlog, counted every 10 s up to 10000 (then: at least): kind=events (recorded, not yet scheduled), kind=deliveries (scheduled, not yet finished: due now or waiting for a retry).",
		}, []string{"kind"}),
		consent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_consent_changes_total",
			Help: "Suppression-list changes, by action (suppressed, lifted) and source (keyword, provider, unsubscribe, api).",
		}, []string{"action", "source"}),
		suppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "msgapi_sends_suppressed_total",
			Help: "Sends refused before any provider call because the recipient is on the suppression list, by channel.",
		}, []string{"channel"}),
		loki: &lokiCollector{
			dropped: prometheus.NewDesc("msgapi_loki_lines_dropped_total",
				"Log lines that never reached Loki, by reason: queue_full (Loki slow or down; the oldest queued lines make room), push_failed (the client gave up after retries), shutdown (the final flush ran out of time).",
				[]string{"reason"}, nil),
			queued: prometheus.NewDesc("msgapi_loki_lines_queued",
				"Log lines waiting for Loki now.", nil, nil),
			queuedBytes: prometheus.NewDesc("msgapi_loki_bytes_queued",
				"Bytes of log lines waiting for Loki now (bounded by MSGAPI_LOKI_BUFFER_BYTES).", nil, nil),
			truncated: prometheus.NewDesc("msgapi_loki_lines_truncated_total",
				"Log lines shipped with a value or their tail cut to the length limits.", nil, nil),
		},
	}
	m.reg.MustRegister(
		m.requests, m.latency, m.sends, m.duplicates, m.idempotency, m.events, m.store, m.loki, m.lost, m.rateLimited, m.pendingByWorkspace,
		m.webhooks, m.webhookDur, m.backlog, m.consent, m.suppressed,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// StoreWriter exports the embedded engine's write queue (store.WriterStats):
// write commands admitted, seconds they waited for the writer, and seconds
// the writer was held. rate(busy) near 1 means writes are the limit.
func (m *Metrics) StoreWriter(stats func() (commands int64, wait, busy time.Duration)) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "msgapi_store_writer_commands_total",
			Help: "Write commands that went through the embedded engine's first-come, first-served writer queue.",
		}, func() float64 { n, _, _ := stats(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "msgapi_store_writer_wait_seconds_total",
			Help: "Seconds write commands spent queued for the embedded engine's writer, summed.",
		}, func() float64 { _, w, _ := stats(); return w.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "msgapi_store_writer_busy_seconds_total",
			Help: "Seconds the embedded engine's writer was held by a write command; its rate is the writer's utilisation (1 = saturated).",
		}, func() float64 { _, _, b := stats(); return b.Seconds() }),
	)
}

// Registry is the registry everything is on (tests, extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format (GET /metrics,
// api.Options.Metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Middleware counts and times every request by route template. An error
// from the handler is rendered here (c.Error) so the status is final; the
// error is not passed on, which is what echo's own request logger does too.
func (m *Metrics) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched" // no route: never the raw URL, which is unbounded
		}
		method := methodLabel(c.Request().Method)
		m.requests.WithLabelValues(method, route, strconv.Itoa(c.Response().Status)).Inc()
		m.latency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
		return nil
	}
}

// OutcomeLost counts one message the outcome sweeper marked unknown.
func (m *Metrics) OutcomeLost() { m.lost.Inc() }

// methodLabel maps a request method to one of a fixed set: any client can
// send any token as a method, and a label taking it raw grows /metrics
// without bound (1,000 made-up methods once made it 301 MB).
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// Sent counts one send outcome (send.Metrics).
func (m *Metrics) Sent(channel, status string) { m.sends.WithLabelValues(channel, status).Inc() }

// ConsentChange counts one suppression-list change.
func (m *Metrics) ConsentChange(action, source string) {
	m.consent.WithLabelValues(action, source).Inc()
}

// Suppressed counts a send refused because its recipient opted out.
func (m *Metrics) Suppressed(channel string) { m.suppressed.WithLabelValues(channel).Inc() }

// Duplicate counts one send stopped by the duplicate guard (send.Metrics).
func (m *Metrics) Duplicate(mode string) { m.duplicates.WithLabelValues(mode).Inc() }

// Idempotency counts one Idempotency-Key outcome. It is the hook for the
// idempotency package (e.g. "executed", "replayed", "conflict_in_flight",
// "conflict_mismatch", "taken_over"); until it calls it, msgapi_events_total
// counts replays and conflicts from their events.
func (m *Metrics) Idempotency(outcome string) { m.idempotency.WithLabelValues(outcome).Inc() }

// RateLimited counts one 429 (api.Options.OnRateLimited) by route and
// workspace: the workspace whose engine is over its limit is the one whose
// messages may be lost (most engines do not retry a 429).
func (m *Metrics) RateLimited(route, workspaceID string) {
	m.rateLimited.WithLabelValues(route, m.workspaceLabel(workspaceID)).Inc()
}

// WebhookAttempt counts one event webhook attempt (notify.Metrics).
func (m *Metrics) WebhookAttempt(outcome string, d time.Duration) {
	m.webhooks.WithLabelValues(outcome).Inc()
	m.webhookDur.Observe(d.Seconds())
}

// WebhookBacklog sets the event webhook backlog (notify.Metrics).
func (m *Metrics) WebhookBacklog(pendingEvents, activeDeliveries int64) {
	m.backlog.WithLabelValues("events").Set(float64(pendingEvents))
	m.backlog.WithLabelValues("deliveries").Set(float64(activeDeliveries))
}

// StoreCommand observes one store round trip; pass it to
// store.Counter.Observe.
func (m *Metrics) StoreCommand(cmd string, d time.Duration) {
	m.store.WithLabelValues(cmd).Observe(d.Seconds())
}

// WatchLoki exports the Loki shipper's counters. Without it the dropped
// counters read 0: nothing is shipped, so nothing is dropped.
func (m *Metrics) WatchLoki(stats func() loki.Stats) {
	m.loki.set(stats)
}

// Events returns a writer for the log stream (next to stdout in a
// zerolog.MultiLevelWriter) that counts each line's event, and the
// duplicate_pending events by workspace.
func (m *Metrics) Events() io.Writer { return eventCounter{m} }

type eventCounter struct{ m *Metrics }

var eventKey = []byte(`"event":`)

func (w eventCounter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, eventKey) {
		return len(p), nil
	}
	var f struct {
		Event       string `json:"event"`
		WorkspaceID string `json:"workspaceId"`
	}
	if json.Unmarshal(p, &f) == nil && f.Event != "" {
		w.m.events.WithLabelValues(w.m.eventNames.admit(boundedName(f.Event))).Inc()
		if f.Event == events.DuplicatePending {
			w.m.pendingByWorkspace.WithLabelValues(w.m.workspaceLabel(f.WorkspaceID)).Inc()
		}
	}
	return len(p), nil
}

// maxWorkspaceLabels bounds the workspace_id label (msgapi_duplicate_pending_total,
// msgapi_rate_limited_total): the first workspaces to appear get their own
// label, later ones share "other" (the LogQL in the README breaks those down).
const maxWorkspaceLabels = 1000

func (m *Metrics) workspaceLabel(id string) string {
	if id == "" || boundedName(id) != id {
		return "other"
	}
	return m.workspaces.admit(id)
}

// boundedName keeps event names shaped like the constants in package events.
func boundedName(s string) string {
	if len(s) > 64 {
		return "other"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "other"
		}
	}
	return s
}

// maxEventNames bounds msgapi_events_total's series. Event names come from
// msgapi's own constants (a few dozen); the cap is a backstop should a line's
// "event" field ever carry input.
const maxEventNames = 256

// labelSet admits at most max distinct values; later new ones become "other".
type labelSet struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func (l *labelSet) admit(v string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if len(l.seen) >= l.max {
		return "other"
	}
	l.seen[v] = true
	return v
}
