package messages

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// RecordOutcome records the outcome's event with the status (no status
// without it), repeats harmlessly, and never moves a message backwards.
func TestRecordOutcome(t *testing.T) {
	st := storetest.New(t, Collections...)
	s := NewStore(st)
	events := &fakeEvents{batch: st.Batch("outcome_events_test")}
	s.OnOutcome(events)
	ctx := context.Background()
	m := &Message{ID: "msg_outcome", WorkspaceID: "ws_a", Direction: "outbound", Status: StatusSending}
	if err := s.Insert(ctx, m); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		to, want string
		fail     bool
	}{
		{StatusSent, StatusSending, true}, // the event could not be recorded: no status either
		{StatusSent, StatusSent, false},
		{StatusSent, StatusSent, false},    // a repeat
		{StatusUnknown, StatusSent, false}, // a late sweeper: never backwards
		{StatusDelivered, StatusDelivered, false},
		{StatusSent, StatusDelivered, false}, // a late receipt
		{StatusUndelivered, StatusDelivered, false},
	}
	for i, st := range steps {
		events.fail = st.fail
		next := Message{ID: m.ID, Status: st.to} // as a sweeper knows it: id and status
		err := s.RecordOutcome(ctx, &next)
		if (err != nil) != st.fail {
			t.Fatalf("step %d (%s): err %v", i, st.to, err)
		}
		got, _, _ := s.Get(ctx, m.ID)
		if got.Status != st.want {
			t.Errorf("step %d: after RecordOutcome(%s) the status is %s, want %s", i, st.to, got.Status, st.want)
		}
	}
	// An event only for the moves that happened: a repeat, a late sweeper
	// and late receipts record none.
	if want := []string{StatusSent, StatusDelivered}; fmt.Sprint(events.recorded) != fmt.Sprint(want) {
		t.Errorf("events recorded %v, want %v", events.recorded, want)
	}
}

// fakeEvents records an event per status in a collection of its own.
type fakeEvents struct {
	batch    *store.Batch
	fail     bool
	recorded []string // the statuses whose event an insert created
}

func (f *fakeEvents) MessageEvent(m Message) (Event, bool, error) {
	if f.fail {
		return nil, false, errors.New("store down")
	}
	return fakeEvent{f: f, m: m}, true, nil
}

type fakeEvent struct {
	f *fakeEvents
	m Message
}

func (e fakeEvent) Insert() store.Together {
	return store.Together{Batch: e.f.batch, Doc: bson.D{{Key: "_id", Value: e.m.ID + ":" + e.m.Status}}}
}

func (e fakeEvent) Inserted(err error) bool {
	if err == nil {
		e.f.recorded = append(e.f.recorded, e.m.Status)
	}
	return err == nil
}

func TestFrom(t *testing.T) {
	for _, to := range []string{StatusSent, StatusDelivered, StatusRead, StatusUnknown} {
		for _, from := range From(to) {
			if !CanMove(from, to) {
				t.Errorf("From(%s) lists %s, which cannot move there", to, from)
			}
		}
	}
	// A scheduled message moves to sent when its status write before the
	// provider call did not land.
	if got := From(StatusSent); fmt.Sprint(got) != fmt.Sprint([]string{StatusScheduled, StatusSending, StatusUnknown}) {
		t.Errorf("From(sent) = %v, want scheduled, sending and unknown", got)
	}
	if got := From(StatusCanceled); fmt.Sprint(got) != fmt.Sprint([]string{StatusScheduled}) {
		t.Errorf("From(canceled) = %v, want only scheduled", got)
	}
	for _, from := range []string{StatusSending, StatusSent, StatusCanceled, StatusSuppressed} {
		if CanMove(from, StatusScheduled) || CanMove(from, StatusCanceled) {
			t.Errorf("%s may move back to scheduled or on to canceled", from)
		}
	}
}

// The first outcome of a message is decided by an insert, so racing
// writers of two outcomes from two processes — the provider's late "sent"
// and the sweeper's "unknown" — end, every time, where the state machine
// allows: sent (unknown may move up to sent, sent never back to unknown).
// With the outcome written by _id alone, the last writer won.
func TestRacingOutcomesNeverMoveBackwards(t *testing.T) {
	stores, ctx := twoProcesses(t), context.Background()
	for round := range 40 {
		id := fmt.Sprintf("msg_race_%d", round)
		if err := stores[0].Insert(ctx, &Message{ID: id, WorkspaceID: "ws_a", Direction: "outbound", Status: StatusSending}); err != nil {
			t.Fatal(err)
		}
		if got := raceOutcomes(t, stores, round, id, StatusUnknown, StatusSent); got != StatusSent {
			t.Fatalf("round %d: racing unknown and sent ended %s, want sent", round, got)
		}
	}
}

// Moves after the first outcome (receipts) race too: delivered and read
// arriving at once, from two processes, end read, never delivered. Each
// move is conditional on what its writer read, on both engines.
func TestRacingLaterMovesNeverMoveBackwards(t *testing.T) {
	stores, ctx := twoProcesses(t), context.Background()
	backwards := 0
	for round := range 40 {
		id := fmt.Sprintf("msg_later_%d", round)
		if err := stores[0].Insert(ctx, &Message{ID: id, WorkspaceID: "ws_a", Direction: "outbound", Status: StatusSending}); err != nil {
			t.Fatal(err)
		}
		if err := stores[0].RecordOutcome(ctx, &Message{ID: id, WorkspaceID: "ws_a", Direction: "outbound", Status: StatusSent}); err != nil {
			t.Fatal(err)
		}
		if got := raceOutcomes(t, stores, round, id, StatusDelivered, StatusRead); got != StatusRead {
			backwards++
			t.Errorf("round %d: racing delivered and read ended %s, want read", round, got)
		}
	}
	if backwards > 0 {
		t.Logf("%d of 40 rounds moved backwards", backwards)
	}
}

// twoProcesses returns two stores on one database: what two msgapi
// processes have.
func twoProcesses(t *testing.T) []*Store {
	st := storetest.New(t, Collections...)
	return []*Store{NewStore(st), NewStore(storetest.Second(t, st))}
}

// raceOutcomes records outcomes a and b of message id at once, one through
// each store (which one alternates with round), and returns the status the
// message ends with.
func raceOutcomes(t *testing.T, stores []*Store, round int, id, a, b string) string {
	t.Helper()
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, to := range []string{a, b} {
		wg.Go(func() {
			m := Message{ID: id, WorkspaceID: "ws_a", Direction: "outbound", Status: to}
			<-start
			errs[i] = stores[(i+round)%2].RecordOutcome(ctx, &m)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, _, err := stores[0].Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return got.Status
}

// GetMany answers what Get answers, id by id, in at most two reads: a
// message with an outcome, one still with its provider (no outcome yet), a
// tombstone, and an id that holds nothing.
func TestGetManyAnswersAsGet(t *testing.T) {
	e := newFeedEnv(t)
	ctx := context.Background()
	sent := e.send(e.s, "+15550100001")
	inFlight, _ := e.message(e.s, "+15550100002", "outbound", ChannelSMS, StatusSending)
	if indexErr, err := e.s.InsertIndexed(ctx, inFlight, true); err != nil || indexErr != nil {
		t.Fatal(err, indexErr)
	}
	tomb := msgapi.NewID("msg")
	if won, err := e.s.Fence(ctx, "test", tomb); err != nil || !won[0] {
		t.Fatal(won, err)
	}
	ids := []string{sent.ID, inFlight.ID, tomb, msgapi.NewID("msg")}

	before := e.st.RoundTrips.Total()
	got, err := e.s.GetMany(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.st.RoundTrips.Total() - before; n != 2 {
		t.Errorf("GetMany cost %d round trips, want 2 (the outcomes, then the rest from messages)", n)
	}
	for _, id := range ids {
		want, found, err := e.s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := got[id]
		if ok != found {
			t.Errorf("%s: GetMany found %v, Get %v", id, ok, found)
			continue
		}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("%s: GetMany differs from Get (-Get +GetMany):\n%s", id, diff)
		}
	}
	if got[sent.ID].Status != StatusSent || got[inFlight.ID].Status != StatusSending || got[tomb].Status != StatusTombstone {
		t.Errorf("statuses %q %q %q, want sent, sending, tombstone", got[sent.ID].Status, got[inFlight.ID].Status, got[tomb].Status)
	}
}
