package messages

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/msgapi/msgapi/store/storetest"
)

// RecordOutcome records the outcome's event before the status, repeats
// harmlessly, and never moves a message backwards.
func TestRecordOutcome(t *testing.T) {
	st := storetest.New(t, Collections...)
	s := NewStore(st)
	var recorded []string
	fail := false
	s.OnOutcome(func(_ context.Context, m Message) error {
		if fail {
			return errors.New("store down")
		}
		recorded = append(recorded, m.Status)
		return nil
	})
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
		fail = st.fail
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
	if want := []string{StatusSent, StatusDelivered}; fmt.Sprint(recorded) != fmt.Sprint(want) {
		t.Errorf("hook calls %v, want %v", recorded, want)
	}
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
