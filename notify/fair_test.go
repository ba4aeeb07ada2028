package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store/storetest"
)

// tarpit is an endpoint that holds every request until the test ends (the
// dispatcher's Timeout cuts each attempt) and counts the ones it holds.
type tarpit struct {
	srv        *httptest.Server
	mu         sync.Mutex
	held, peak int
}

func newTarpit(t *testing.T, release <-chan struct{}) *tarpit {
	tp := &tarpit{}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.held++
		tp.peak = max(tp.peak, tp.held)
		tp.mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		tp.mu.Lock()
		tp.held--
		tp.mu.Unlock()
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tarpit) peakHeld() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.peak
}

// A workspace whose endpoints hang spends only its own share of the
// workers: with all five of ws_a's endpoints holding every request until
// the attempt times out, ws_b's event still reaches its endpoint at once,
// and no more than WorkspaceShare of ws_a's attempts (EndpointShare per
// endpoint) were ever open together, counted at the endpoints.
func TestSlowWorkspaceDoesNotStallOthers(t *testing.T) {
	st := storetest.New(t, Collections...)
	release := make(chan struct{})
	defer close(release) // before the servers close: let the held requests go
	const timeout = 4 * time.Second
	ob := run(t, st, Options{Workers: 8, Timeout: timeout})
	var pits []*tarpit
	for range 5 {
		tp := newTarpit(t, release)
		pits = append(pits, tp)
		mustEndpoint(t, ob, "ws_a", tp.srv.URL)
	}
	fast := newEndpoint(t, func(int) int { return http.StatusNoContent })
	mustEndpoint(t, ob, "ws_b", fast.srv.URL)
	ctx := context.Background()
	for i := range 10 { // 50 deliveries that each hang for the Timeout
		if _, err := ob.Record(ctx, fact("ws_a", fmt.Sprintf("msg_a%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	heldByA := func() (n int) {
		for _, tp := range pits {
			tp.mu.Lock()
			n += tp.held
			tp.mu.Unlock()
		}
		return n
	}
	waitFor(t, "ws_a's endpoints to hold requests", func() bool { return heldByA() > 0 })
	time.Sleep(100 * time.Millisecond) // ws_a fills whatever it is given
	if _, err := ob.Record(ctx, fact("ws_b", "msg_b")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, "ws_b's delivery", func() bool { return len(fast.got()) == 1 })
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("ws_b's event took %v behind ws_a's hanging endpoints; want well under the %v timeout", took, timeout)
	}
	if n, share := heldByA(), ob.opts.WorkspaceShare; n > share {
		t.Errorf("ws_a holds %d requests open, more than its share of %d", n, share)
	}
	for i, tp := range pits {
		if p := tp.peakHeld(); p > ob.opts.EndpointShare {
			t.Errorf("endpoint %d held %d requests at once, more than the share of %d", i, p, ob.opts.EndpointShare)
		}
	}
}

// A backlog of one workspace's due deliveries longer than a batch does not
// keep another workspace's retry out of the batch: the due query leaves
// out the workspaces and endpoints that hold their share.
func TestLongBacklogDoesNotHideOtherRetries(t *testing.T) {
	st := storetest.New(t, Collections...)
	release := make(chan struct{})
	defer close(release)
	const timeout = 4 * time.Second
	ob := run(t, st, Options{Workers: 8, Timeout: timeout})
	for range 2 {
		mustEndpoint(t, ob, "ws_a", newTarpit(t, release).srv.URL)
	}
	ctx := context.Background()
	for i := range 75 { // 150 deliveries, more than a batch
		if _, err := ob.Record(ctx, fact("ws_a", fmt.Sprintf("msg_a%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "ws_a's backlog to be scheduled", func() bool {
		n, _ := st.Collection(collDeliveries).CountDocuments(ctx, bson.D{})
		p, _ := st.Collection(collPending).CountDocuments(ctx, bson.D{})
		return n == 150 && p == 0
	})
	flaky := newEndpoint(t, func(n int) int { // the retry is found only by the due query
		if n == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	mustEndpoint(t, ob, "ws_b", flaky.srv.URL)
	if _, err := ob.Record(ctx, fact("ws_b", "msg_b")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ws_b's first attempt", func() bool { return len(flaky.got()) >= 1 })
	start := time.Now()
	waitFor(t, "ws_b's retry", func() bool { return len(flaky.got()) == 2 })
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("ws_b's retry took %v behind ws_a's backlog; want well under the %v timeout", took, timeout)
	}
}
