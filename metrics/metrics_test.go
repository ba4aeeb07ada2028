package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/events/loki"
)

func newEcho(m *Metrics) *echo.Echo {
	e := echo.New()
	e.Use(m.Middleware)
	e.GET("/api/messages/:id", func(c echo.Context) error { return c.String(http.StatusOK, c.Param("id")) })
	e.POST("/api/messages", func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "no")
	})
	m.Mount(e)
	return e
}

func serve(e *echo.Echo, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestMiddlewareLabelsByRouteTemplate(t *testing.T) {
	m := New()
	e := newEcho(m)
	for _, id := range []string{"msg_1", "msg_2", "msg_3"} {
		serve(e, http.MethodGet, "/api/messages/"+id)
	}
	if rec := serve(e, http.MethodPost, "/api/messages"); rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("POST: status %d, want the handler's error rendered as 422", rec.Code)
	}
	serve(e, http.MethodGet, "/no/such/path/abc")
	serve(e, http.MethodGet, "/no/such/path/def")

	want := `
# HELP msgapi_http_requests_total HTTP requests by method, route template and status code.
# TYPE msgapi_http_requests_total counter
msgapi_http_requests_total{method="GET",route="/api/messages/:id",status="200"} 3
msgapi_http_requests_total{method="GET",route="unmatched",status="404"} 2
msgapi_http_requests_total{method="POST",route="/api/messages",status="422"} 1
`
	if err := testutil.CollectAndCompare(m.requests, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.latency); n != 3 {
		t.Errorf("latency has %d series, want 3 (one per method and route)", n)
	}
}

func TestSendPathAndStore(t *testing.T) {
	m := New()
	m.Sent("sms", "sent")
	m.Sent("sms", "sent")
	m.Sent("email", "failed")
	m.Duplicate(events.ModeLockResolved)
	m.Duplicate("pending")
	m.Idempotency("replayed")
	m.StoreCommand("insert", 2*time.Millisecond)
	m.StoreCommand("find", time.Millisecond)
	m.StoreCommand("find", 3*time.Millisecond)

	for _, tt := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.sends.WithLabelValues("sms", "sent")), 2, "sms sent"},
		{testutil.ToFloat64(m.sends.WithLabelValues("email", "failed")), 1, "email failed"},
		{testutil.ToFloat64(m.duplicates.WithLabelValues("lock_resolved")), 1, "lock_resolved"},
		{testutil.ToFloat64(m.duplicates.WithLabelValues("pending")), 1, "pending"},
		{testutil.ToFloat64(m.idempotency.WithLabelValues("replayed")), 1, "replayed"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.what, tt.got, tt.want)
		}
	}
	body := scrape(t, m)
	for _, want := range []string{
		`msgapi_store_command_duration_seconds_count{command="find"} 2`,
		`msgapi_store_command_duration_seconds_count{command="insert"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Events are counted from the log stream, as zerolog writes it.
func TestEventsFromLogLines(t *testing.T) {
	m := New()
	log := zerolog.New(zerolog.MultiLevelWriter(io.Discard, m.Events()))
	log.Warn().Str("event", events.DuplicateGuardError).Msg("guard store error")
	log.Info().Str("event", events.IdempotentReplay).Msg("replay")
	log.Info().Str("event", events.IdempotentReplay).Msg("replay")
	log.Info().Msg("no event")
	log.Info().Str("note", `"event": inside a value`).Msg("still no event")
	log.Info().Str("event", "Unbounded text with spaces").Msg("odd")

	want := `
# HELP msgapi_events_total Event lines logged, by event name (only lines at or above the log level).
# TYPE msgapi_events_total counter
msgapi_events_total{event="message.api.duplicate_guard_error"} 1
msgapi_events_total{event="message.api.idempotent_replay"} 2
msgapi_events_total{event="other"} 1
`
	if err := testutil.CollectAndCompare(m.events, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestLokiCounters(t *testing.T) {
	m := New()
	if body := scrape(t, m); !strings.Contains(body, `msgapi_loki_lines_dropped_total{reason="queue_full"} 0`) {
		t.Errorf("without Loki the dropped counters should read 0:\n%s", grep(body, "msgapi_loki"))
	}
	m.WatchLoki(func() loki.Stats { return loki.Stats{Queued: 7, QueueFull: 42, PushFailed: 3, Shutdown: 1} })
	body := scrape(t, m)
	for _, want := range []string{
		`msgapi_loki_lines_dropped_total{reason="queue_full"} 42`,
		`msgapi_loki_lines_dropped_total{reason="push_failed"} 3`,
		`msgapi_loki_lines_dropped_total{reason="shutdown"} 1`,
		`msgapi_loki_lines_queued 7`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grep(body, "msgapi_loki"))
		}
	}
}

// Two Metrics in one process do not collide: nothing is global.
func TestNoGlobalRegistry(t *testing.T) {
	a, b := New(), New()
	a.Sent("sms", "sent")
	if got := testutil.ToFloat64(b.sends.WithLabelValues("sms", "sent")); got != 0 {
		t.Errorf("b sees a's send: %v", got)
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	e := echo.New()
	m.Mount(e)
	rec := serve(e, http.MethodGet, "/metrics")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func grep(s, substr string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			fmt.Fprintln(&b, l)
		}
	}
	return b.String()
}
