package notify

import (
	"context"
	"fmt"
	"testing"
	"time"

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

// Events no endpoint wants are archived together: a pass over 250 of them,
// in two workspaces, costs a handful of write commands (one per event
// would be 750: a log entry, an archive, a delete); another process's
// dispatcher, passing at the same time over the same backlog, leaves the
// events to the process that recorded them, so each workspace's log is
// dense (slots 1..n) and lists each event once, and nothing is pending.
func TestArchiveQuietInFewCommands(t *testing.T) {
	st := storetest.New(t, Collections...)
	ctx := context.Background()
	ob := New(Options{Store: st, Log: zerolog.Nop()})
	const n = 250
	for i := range n {
		if _, err := ob.Record(ctx, fact([]string{"ws_a", "ws_b"}[i%2], fmt.Sprintf("msg_%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	other := New(Options{Store: storetest.Second(t, st), Log: zerolog.Nop()})
	before := st.RoundTrips.ByName()
	work := make(chan delivery, 1)
	done := make(chan int, 1)
	go func() { done <- other.pass(ctx, work) }()
	ob.pass(ctx, work)
	<-done
	for range 2 { // whatever the two passes left to each other
		ob.pass(ctx, work)
	}
	after := st.RoundTrips.ByName()
	writes := (after["insert"] - before["insert"]) + (after["update"] - before["update"]) + (after["delete"] - before["delete"])
	if writes > 25 {
		t.Errorf("%d write commands in this process to archive %d events (%v → %v), want a few", writes, n, before, after)
	}
	t.Logf("%d write commands here for %d events", writes, n)
	if left, _ := ob.pending.CountDocuments(ctx, bson.D{}); left != 0 {
		t.Errorf("%d events still pending", left)
	}
	if archived, _ := ob.events.CountDocuments(ctx, bson.D{{Key: "scheduled", Value: true}}); archived != n {
		t.Errorf("%d events archived, want %d", archived, n)
	}
	for _, ws := range []string{"ws_a", "ws_b"} {
		entries, _ := ob.evlog.CountDocuments(ctx, bson.D{{Key: "workspaceId", Value: ws}, {Key: "eventId", Value: bson.D{{Key: "$exists", Value: true}}}})
		if entries != n/2 {
			t.Errorf("%s: %d log entries for %d events", ws, entries, n/2)
		}
		for slot := int64(1); slot <= entries; slot++ {
			if err := st.Collection(collLog).FindOne(ctx, store.ByID(logID(ws, slot))).Err(); err != nil {
				t.Errorf("%s: log slot %d of %d: %v", ws, slot, entries, err)
			}
		}
		p, err := ob.ListEvents(ctx, ws, ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) != 100 || p.NextCursor == "" {
			t.Errorf("%s: first page of %d events, cursor %q; want 100 and more", ws, len(p.Events), p.NextCursor)
		}
	}
}

// A process that recorded events and died leaves them pending: another
// process's dispatcher takes them once it has seen them pending for its
// grace, on its own clock.
func TestOthersEventsTakenAfterGrace(t *testing.T) {
	st := storetest.New(t, Collections...)
	ctx := context.Background()
	dead := New(Options{Store: st, Log: zerolog.Nop()})
	for i := range 10 {
		if _, err := dead.Record(ctx, fact("ws_a", fmt.Sprintf("msg_%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	live := New(Options{Store: storetest.Second(t, st), Log: zerolog.Nop()})
	live.otherGrace = 200 * time.Millisecond
	work := make(chan delivery, 1)
	live.pass(ctx, work)
	if left, _ := live.pending.CountDocuments(ctx, bson.D{}); left != 10 {
		t.Fatalf("%d events pending after the first pass, want 10: another process's fresh events are left to it", left)
	}
	time.Sleep(250 * time.Millisecond)
	live.pass(ctx, work)
	if left, _ := live.pending.CountDocuments(ctx, bson.D{}); left != 0 {
		t.Errorf("%d events pending after the grace, want 0", left)
	}
	if n, _ := live.events.CountDocuments(ctx, bson.D{{Key: "scheduled", Value: true}, {Key: "owner", Value: bson.D{{Key: "$exists", Value: false}}}}); n != 10 {
		t.Errorf("%d events archived (without an owner), want 10", n)
	}
}
