package loki

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/google/go-cmp/cmp"
	"github.com/grafana/loki/pkg/push"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/logcap"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
)

// fakeClient records what the drainer hands it. With block set, each
// Handle waits until release is closed, like the real client while Loki is
// unreachable.
type fakeClient struct {
	block   bool
	release chan struct{}
	entered chan struct{}

	mu      sync.Mutex
	got     []fakeEntry
	stopped int // len(got) when Stop was called, -1 before
}

type fakeEntry struct {
	Labels string
	Line   string
}

func noFailures() uint64 { return 0 }

func newFake(t *testing.T, block bool) *fakeClient {
	f := &fakeClient{block: block, release: make(chan struct{}), entered: make(chan struct{}, 1<<16), stopped: -1}
	t.Cleanup(f.unblock) // lets stuck goroutines finish
	return f
}

func (f *fakeClient) unblock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

func (f *fakeClient) Handle(ls model.LabelSet, _ time.Time, line string) error {
	f.entered <- struct{}{}
	if f.block {
		<-f.release
	}
	f.mu.Lock()
	f.got = append(f.got, fakeEntry{ls.String(), line})
	f.mu.Unlock()
	return nil
}

func (f *fakeClient) Stop() {
	if f.block {
		<-f.release
	}
	f.mu.Lock()
	f.stopped = len(f.got)
	f.mu.Unlock()
}

func (f *fakeClient) entries() []fakeEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeEntry(nil), f.got...)
}

// within fails the test if fn has not returned after d: a guard against a
// hang, not a timing claim.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

func TestLokiLabels(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{`{"level":"info","event":"message.api.duplicate_blocked","workspaceId":"ws_1","mode":"lock_resolved"}`,
			`{app="msgapi", env="test", event="message.api.duplicate_blocked", level="info"}`},
		{`{"level":"warn","message":"no event here"}`, `{app="msgapi", env="test", level="warn"}`},
		{`{"message":"no level either"}`, `{app="msgapi", env="test"}`},
		{`not json at all`, `{app="msgapi", env="test"}`},
		{`{"level":"info","event":"Workspace ws_1 did a thing"}`, `{app="msgapi", env="test", event="other", level="info"}`},
		{`{"level":"loud","event":"x"}`, `{app="msgapi", env="test", event="x", level="other"}`},
	}
	f := newFake(t, false)
	l := newShipper(Options{App: "msgapi", Env: "test"}, f, noFailures)
	for _, tt := range tests {
		fmt.Fprintln(l, tt.line) // as zerolog writes: one line, newline-terminated
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var want []fakeEntry
	for _, tt := range tests {
		want = append(want, fakeEntry{tt.want, tt.line})
	}
	if diff := cmp.Diff(want, f.entries()); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// Loki down: the drainer is stuck in Handle. Writers must still return at
// once, and every line beyond the buffer must be counted as dropped.
func TestLokiWriteNeverBlocksWhenClientIsStuck(t *testing.T) {
	const buffer, writers, perWriter = 10, 4, 250
	f := newFake(t, true)
	l := newShipper(Options{Buffer: buffer}, f, noFailures)
	fmt.Fprintln(l, `{"level":"info","message":"first"}`)
	<-f.entered // the drainer now holds "first" and is stuck

	within(t, 10*time.Second, "writes while the client is stuck", func() {
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perWriter; i++ {
					fmt.Fprintf(l, `{"level":"info","event":"message.api.sent","i":%d}`+"\n", i)
				}
			}()
		}
		wg.Wait()
	})
	got := l.Stats()
	want := Stats{Queued: buffer, QueueFull: writers*perWriter - buffer}
	// Each line is 49 to 51 bytes (i has 1 to 3 digits).
	if got.QueuedBytes < buffer*49 || got.QueuedBytes > buffer*51 {
		t.Errorf("queued bytes = %d, want %d lines' worth (%d..%d)", got.QueuedBytes, buffer, buffer*49, buffer*51)
	}
	got.QueuedBytes = 0
	if got != want {
		t.Errorf("stats while stuck = %+v, want %+v", got, want)
	}

	f.unblock()
	within(t, 10*time.Second, "Close", func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	if n := len(f.entries()); n != 1+buffer {
		t.Errorf("client got %d lines, want %d", n, 1+buffer)
	}
	if got := l.Stats(); got.Handed != 1+buffer || got.Queued != 0 {
		t.Errorf("stats after Close = %+v, want %d handed, none queued", got, 1+buffer)
	}
}

// Shutdown with Loki down: Close gives up after FlushTimeout, counts what
// was still queued, and later writes are counted, not blocked.
func TestLokiCloseIsBounded(t *testing.T) {
	f := newFake(t, true)
	l := newShipper(Options{Buffer: 10, FlushTimeout: 100 * time.Millisecond}, f, noFailures)
	fmt.Fprintln(l, `{"level":"info"}`)
	<-f.entered
	for i := 0; i < 5; i++ {
		fmt.Fprintln(l, `{"level":"info"}`)
	}
	var err error
	within(t, 10*time.Second, "Close with a stuck client", func() { err = l.Close() })
	if err == nil {
		t.Error("Close returned nil, want the flush timeout error")
	}
	within(t, 10*time.Second, "Write after Close", func() { fmt.Fprintln(l, `{"level":"info"}`) })
	if got := l.Stats(); got.Shutdown != 6 || got.Queued != 0 {
		t.Errorf("stats = %+v, want 6 dropped at shutdown, none queued", got)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Every line written while Close runs is either handed over or counted,
// and Stop comes after the last hand-over.
func TestLokiCloseAccountsForEveryLine(t *testing.T) {
	f := newFake(t, false)
	l := newShipper(Options{Buffer: 64}, f, noFailures)
	const writers, perWriter = 4, 500
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				fmt.Fprintln(l, `{"level":"debug"}`)
			}
		}()
	}
	time.Sleep(time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s := l.Stats()
	if total := s.Handed + s.QueueFull + s.Shutdown; total != writers*perWriter || s.Queued != 0 {
		t.Errorf("stats %+v account for %d lines, want %d", s, total, writers*perWriter)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped != len(f.got) || uint64(len(f.got)) != s.Handed {
		t.Errorf("Stop after %d of %d lines (%d handed)", f.stopped, len(f.got), s.Handed)
	}
}

// lokiServer is a minimal Loki push endpoint (snappy-compressed protobuf).
type lokiServer struct {
	*httptest.Server
	mu      sync.Mutex
	streams map[string][]string
}

func newLokiServer(t *testing.T) *lokiServer {
	s := &lokiServer{streams: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		raw, err := snappy.Decode(nil, b)
		var req push.PushRequest
		if err == nil {
			err = req.Unmarshal(raw)
		}
		if r.URL.Path != "/loki/api/v1/push" || err != nil {
			t.Errorf("push %s: %v", r.URL.Path, err)
			http.Error(w, "bad push", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		for _, st := range req.Streams {
			for _, e := range st.Entries {
				s.streams[st.Labels] = append(s.streams[st.Labels], e.Line)
			}
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

// The real client, end to end against a Loki push endpoint.
func TestLokiClientPushes(t *testing.T) {
	srv := newLokiServer(t)
	l, err := New(Options{URL: srv.URL + "/loki/api/v1/push", App: "msgapi", Env: "test", BatchWait: 50 * time.Millisecond, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.MultiLevelWriter(io.Discard, l))
	log.Info().Str("event", events.DuplicateBlocked).Str("mode", events.ModeLockResolved).Msg("duplicate")
	log.Info().Str("event", events.DuplicateBlocked).Str("mode", events.ModeLockResolvedPolled).Msg("duplicate")
	log.Warn().Msg("plain")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	var got []string
	for labels, lines := range srv.streams {
		got = append(got, fmt.Sprintf("%s %d", labels, len(lines)))
	}
	sort.Strings(got)
	want := []string{
		`{app="msgapi", env="test", event="message.api.duplicate_blocked", level="info"} 2`,
		`{app="msgapi", env="test", level="warn"} 1`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streams (-want +got):\n%s", diff)
	}
	if s := l.Stats(); s.Handed != 3 || s.QueueFull+s.Shutdown+s.PushFailed != 0 {
		t.Errorf("stats = %+v, want 3 handed, none dropped", s)
	}
}

// A batch Loki refuses (4xx: not retried) is lost; the client counts it
// only in its own metric, which Stats reads.
func TestLokiClientRejectedCountsPushFailed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "entry too far behind", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	l, err := New(Options{URL: srv.URL + "/loki/api/v1/push", BatchWait: 10 * time.Millisecond, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintln(l, `{"level":"info"}`)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Handed != 3 || s.PushFailed != 3 {
		t.Errorf("stats = %+v, want 3 handed and 3 push_failed", s)
	}
}

// The real client with nothing listening: logging goes on, Close is bounded.
func TestLokiClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l, err := New(Options{URL: "http://" + addr + "/loki/api/v1/push", Buffer: 5, BatchWait: 10 * time.Millisecond, FlushTimeout: 200 * time.Millisecond, Log: zerolog.New(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	within(t, 30*time.Second, "1000 writes with Loki unreachable", func() {
		for i := 0; i < 1000; i++ {
			fmt.Fprintln(l, `{"level":"info","event":"message.api.sent"}`)
			if i%100 == 0 {
				time.Sleep(20 * time.Millisecond) // let the client start its first batch and get stuck retrying it
			}
		}
	})
	within(t, 30*time.Second, "Close with Loki unreachable", func() {
		if err := l.Close(); err == nil {
			t.Error("Close returned nil, want the flush timeout error")
		}
	})
	if s := l.Stats(); s.QueueFull == 0 {
		t.Errorf("stats = %+v, want lines dropped on a full queue", s)
	}
}

func TestNewLokiRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "loki:3100", "ftp://loki/push", "http:///loki/api/v1/push"} {
		if _, err := New(Options{URL: u}); err == nil {
			t.Errorf("New(%q) = nil error", u)
		}
	}
}

// Loki hanging and a flood of lines carrying a 60 KB client-sent value (the
// attack once took the process from 85 MB to 700 MB): every line is capped,
// the queue never holds more than BufferBytes, and what is kept is the
// newest lines, in order. Bytes are counted, not timed: what the client
// receives afterwards adds up to what the queue said it held.
func TestLokiQueueBoundedByBytesKeepsNewest(t *testing.T) {
	const maxBytes, flood = 64 << 10, 1000
	f := newFake(t, true)
	l := newShipper(Options{Buffer: 1_000_000, BufferBytes: maxBytes}, f, noFailures)
	fmt.Fprintln(l, `{"level":"info","message":"first"}`)
	<-f.entered // the drainer holds "first" and is stuck

	huge := strings.Repeat("w", 60_000)
	maxQueued := 0
	for i := range flood {
		fmt.Fprintf(l, `{"level":"warn","event":"inbound.signature_invalid","workspaceId":"%s","i":%d}`+"\n", huge, i)
		s := l.Stats()
		maxQueued = max(maxQueued, s.QueuedBytes)
		if s.QueuedBytes > maxBytes {
			t.Fatalf("after %d lines %d bytes are queued, over the %d-byte bound", i+1, s.QueuedBytes, maxBytes)
		}
	}
	s := l.Stats()
	if s.Truncated != flood {
		t.Errorf("truncated %d lines, want all %d", s.Truncated, flood)
	}
	if s.Queued == 0 || s.Queued > maxBytes/logcap.MaxField || s.QueueFull != uint64(flood-s.Queued) {
		t.Errorf("stats = %+v: want a few dozen lines queued and the rest (%d) dropped", s, flood-s.Queued)
	}
	if maxQueued < maxBytes-logcap.MaxLine {
		t.Errorf("the queue peaked at %d bytes; want it used up to its %d-byte bound", maxQueued, maxBytes)
	}

	f.unblock()
	within(t, 10*time.Second, "Close", func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	got := f.entries()
	if len(got) != 1+s.Queued {
		t.Fatalf("client got %d lines, want 1 + %d queued", len(got), s.Queued)
	}
	sum := 0
	for k, e := range got[1:] {
		sum += len(e.Line)
		var v struct {
			WorkspaceID string `json:"workspaceId"`
			I           int    `json:"i"`
		}
		if err := json.Unmarshal([]byte(e.Line), &v); err != nil {
			t.Fatalf("line %d is not JSON after capping: %v", k, err)
		}
		if want := flood - s.Queued + k; v.I != want {
			t.Errorf("line %d has i=%d, want %d: the newest lines, oldest first", k, v.I, want)
		}
		if len(v.WorkspaceID) > logcap.MaxField+len(logcap.Marker)+20 || !strings.Contains(v.WorkspaceID, logcap.Marker) {
			t.Errorf("workspaceId kept %d bytes, want it cut to %d with the marker", len(v.WorkspaceID), logcap.MaxField)
		}
	}
	if sum != s.QueuedBytes {
		t.Errorf("client received %d bytes of queued lines, the queue counted %d", sum, s.QueuedBytes)
	}
}

// Bounded by lines, too: the newest lines are the ones kept.
func TestLokiQueueFullDropsOldest(t *testing.T) {
	const buffer = 5
	f := newFake(t, true)
	l := newShipper(Options{Buffer: buffer}, f, noFailures)
	fmt.Fprintln(l, `{"i":-1}`)
	<-f.entered
	for i := range 12 {
		fmt.Fprintf(l, `{"i":%d}`+"\n", i)
	}
	f.unblock()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range f.entries() {
		got = append(got, e.Line)
	}
	want := []string{`{"i":-1}`, `{"i":7}`, `{"i":8}`, `{"i":9}`, `{"i":10}`, `{"i":11}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if s := l.Stats(); s.QueueFull != 7 {
		t.Errorf("queue_full = %d, want 7", s.QueueFull)
	}
}
