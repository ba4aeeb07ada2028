package notify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/store/storetest"
)

// Manual redelivery is bounded per event: past MaxRedeliveries rounds it is
// refused (it was 999 rounds, each a probe of the store).
func TestRedeliveryRoundsBounded(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	mustEndpoint(t, ob, "ws_a", "https://hooks.example.com/x")
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	id := EventID("ws_a", TypeMessageSent, "msg_1")
	for i := range MaxRedeliveries {
		if eps, err := ob.Redeliver(ctx, "ws_a", id); err != nil || len(eps) != 1 {
			t.Fatalf("redelivery %d: %v %v", i+1, eps, err)
		}
	}
	if _, err := ob.Redeliver(ctx, "ws_a", id); err == nil {
		t.Errorf("redelivery %d accepted, want refused", MaxRedeliveries+1)
	}
}

// GET /api/events/{id} is bounded in size and store reads however many
// rounds and attempts an event has (here 20 endpoints × 30 rounds, written
// directly, as an older version allowed).
func TestGetEventBounded(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	id := "evt_many"
	now := time.Now().UTC().Truncate(time.Millisecond)
	var eps []string
	for i := range MaxEndpoints {
		eps = append(eps, fmt.Sprintf("we_%02d", i))
	}
	e := event{ID: id, WorkspaceID: "ws_a", Type: TypeMessageSent, CreatedAt: now, Payload: `{"id":"evt_many","type":"message.sent"}`, Scheduled: true, EndpointIDs: eps}
	if _, err := ob.events.InsertOne(ctx, e); err != nil {
		t.Fatal(err)
	}
	var docs []any
	for _, ep := range eps {
		for round := range 30 {
			d := DeliveryID(id, ep, round)
			docs = append(docs, attempt{ID: attemptID(d, 1), DeliveryID: d, N: 1, StartedAt: now, LeaseUntil: now, ExpiresAt: now.Add(time.Hour)})
		}
	}
	if _, err := ob.attempts.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	before := st.RoundTrips.ByName()["find"]
	v, err := ob.GetEvent(ctx, "ws_a", id)
	if err != nil {
		t.Fatal(err)
	}
	reads := st.RoundTrips.ByName()["find"] - before
	if len(v.Attempts) > MaxAttemptsShown || !v.AttemptsTruncated {
		t.Errorf("%d attempts shown (truncated %v), want at most %d and truncated", len(v.Attempts), v.AttemptsTruncated, MaxAttemptsShown)
	}
	if reads > 3*MaxAttemptsShown {
		t.Errorf("%d store reads for one event, want at most %d", reads, 3*MaxAttemptsShown)
	}
}
