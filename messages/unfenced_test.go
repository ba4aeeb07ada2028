package messages_test

import (
	"context"
	"errors"
	"testing"

	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/store/storetest"
)

// The fence makes a fenced id unwritable; the test-only unfenced store only
// judges whether the id is free and lets the holder write it afterwards —
// the double send test/chaos -unfenced must be able to show.
func TestUnfencedForTestsRestoresTheRace(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t, messages.Collections...)
	fenced := messages.NewStore(st)
	unfenced := fenced.UnfencedForTests()

	for _, tc := range []struct {
		name      string
		s         *messages.Store
		id        string
		wantWon   bool
		wantFence bool // the holder's later insert is refused
	}{
		{"fenced", fenced, "msg_chaos_fenced", true, true},
		{"unfenced", unfenced, "msg_chaos_unfenced", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			won, err := tc.s.Fence(ctx, "test", tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if len(won) != 1 || won[0] != tc.wantWon {
				t.Fatalf("won = %v, want [%v]", won, tc.wantWon)
			}
			err = tc.s.Insert(ctx, &messages.Message{ID: tc.id, WorkspaceID: "ws_chaos", Direction: "outbound", Status: messages.StatusSending})
			if got := errors.Is(err, messages.ErrFenced); got != tc.wantFence {
				t.Fatalf("insert after fence: %v, want fenced=%v", err, tc.wantFence)
			}
			// Once the message exists, even the unfenced store reports
			// the id as taken.
			won, err = tc.s.Fence(ctx, "test", tc.id)
			if err != nil || len(won) != 1 || won[0] {
				t.Errorf("second fence: won %v, err %v; want [false]", won, err)
			}
		})
	}
}
