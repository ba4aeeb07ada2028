package idempotency

import (
	"context"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// The review's suspicion about takeOver: after winning a generation, a
// rewrite of the record that failed was followed by deleting the takeover
// document, which let a second request win the same generation. When the
// failure was a timeout the rewrite may still land (on MongoDB the server
// runs it after the driver gave up), after the second winner's rewrite:
// two requests would then run under one key. This reproduces the first
// half deterministically (a rewrite that times out, then a second taker of
// the same generation): the second taker must lose. Before the fix it won.
func TestUncertainRewriteKeepsItsClaim(t *testing.T) {
	st := storetest.New(t, Collections...)
	uri, dir := storetest.URI(t)
	ctx := context.Background()
	slow, err := store.Open(ctx, store.Options{URI: uri, SQLiteDir: dir, Database: st.DB.Name(), OpTimeout: 200 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Client.Disconnect(context.Background()) })
	slow.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "update" {
			time.Sleep(400 * time.Millisecond) // past the operation's deadline
		}
	})
	opts := func(s *store.Store) Options {
		return Options{Store: s, WorkspaceID: func(echo.Context) string { return "ws" }, Body: func(echo.Context) []byte { return nil }}
	}
	a, b := New(opts(slow)), New(opts(st))

	now := time.Now()
	old := record{ID: "rec_1", WorkspaceID: "ws", State: stateInProgress, Token: "t0",
		ClaimedAt: now.Add(-2 * time.Minute), LeaseUntil: now.Add(-time.Minute), CreatedAt: now.Add(-2 * time.Minute), ExpiresAt: now.Add(time.Hour)}
	if err := b.insert(ctx, old); err != nil {
		t.Fatal(err)
	}
	nextA, nextB := old, old
	nextA.Token, nextB.Token = "ta", "tb"
	if won, err := a.takeOver(ctx, old, nextA, now); won || err == nil {
		t.Fatalf("first takeover with a timed-out rewrite = %v, %v; want an error", won, err)
	}
	if won, err := b.takeOver(ctx, old, nextB, now); err != nil || won {
		t.Fatalf("second takeover of the same generation = %v, %v; want lost: the first rewrite may still land", won, err)
	}
}
