package notify

import (
	"context"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// An event no endpoint wants is archived in three writes (log entry,
// archive marked scheduled, pending deleted), and archiving it again — a
// dispatcher that died before deleting the pending document — appends no
// second log entry.
func TestArchiveUnsubscribedOnce(t *testing.T) {
	st := storetest.New(t, Collections...)
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	ctx := context.Background()
	if _, err := ob.Record(ctx, fact("ws_a", "msg_1")); err != nil {
		t.Fatal(err)
	}
	var e event
	if err := ob.pending.FindOne(ctx, bson.D{}).Decode(&e); err != nil {
		t.Fatal(err)
	}
	before := st.RoundTrips.ByName()
	if _, err := ob.archive(ctx, e); err != nil {
		t.Fatal(err)
	}
	after := st.RoundTrips.ByName()
	if w := (after["insert"] - before["insert"]) + (after["update"] - before["update"]) + (after["delete"] - before["delete"]); w != 3 {
		t.Errorf("%d writes to archive an event nobody subscribed to, want 3 (%v → %v)", w, before, after)
	}
	// The repeat: the pending document is back, as if the delete never ran.
	if _, err := ob.pending.InsertOne(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.archive(ctx, e); err != nil {
		t.Fatal(err)
	}
	if n, _ := ob.evlog.CountDocuments(ctx, bson.D{{Key: "eventId", Value: e.ID}}); n != 1 {
		t.Errorf("%d log entries for the event, want 1", n)
	}
	if n, _ := ob.pending.CountDocuments(ctx, bson.D{}); n != 0 {
		t.Errorf("%d pending events left, want 0", n)
	}
	var have event
	if err := ob.events.FindOne(ctx, store.ByID(e.ID)).Decode(&have); err != nil || !have.Scheduled {
		t.Errorf("archive %+v (%v), want it marked scheduled", have, err)
	}
}

// The log's head hint is written every hintEvery appends: a process that
// starts appending later, and a reader that never appended, still find the
// true head, and the log has no gap and no entry twice.
func TestLogHeadHintLags(t *testing.T) {
	st := storetest.New(t, Collections...)
	ctx := context.Background()
	first := New(Options{Store: st, Log: zerolog.Nop()})
	archiveAll := func(ob *Outbox, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := ob.Record(ctx, fact("ws_a", fmt.Sprintf("msg_%02d", i))); err != nil {
				t.Fatal(err)
			}
			var e event
			if err := ob.pending.FindOne(ctx, store.ByID(EventID("ws_a", TypeMessageSent, fmt.Sprintf("msg_%02d", i)))).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if _, err := ob.archive(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	archiveAll(first, 0, hintEvery+5) // the hint says 16, the head is 21
	second := New(Options{Store: st, Log: zerolog.Nop()})
	archiveAll(second, hintEvery+5, hintEvery+8)
	reader := New(Options{Store: st, Log: zerolog.Nop()})
	p, err := reader.ListEvents(ctx, "ws_a", ListQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != hintEvery+8 {
		t.Fatalf("%d events listed, want %d", len(p.Events), hintEvery+8)
	}
	seen := map[string]bool{}
	for _, v := range p.Events {
		if seen[v.ID] {
			t.Errorf("event %s listed twice", v.ID)
		}
		seen[v.ID] = true
	}
	for n := int64(1); n <= hintEvery+8; n++ {
		if err := st.Collection(collLog).FindOne(ctx, store.ByID(logID("ws_a", n))).Err(); err != nil {
			t.Errorf("log slot %d: %v", n, err)
		}
	}
}
