package guard

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// Reproduces the review's R1: the reaper claims an expired lock's
// generation, then stalls before its delete; its claim is taken over after
// the lease (a real stall, no clock skew) and the taker rewrites the lock.
// The reaper's late delete must not remove the taker's fresh lock: before
// the fix it deleted by _id alone, and a third identical request then won an
// empty lock and sent again (two winners for one text in one window). The
// same code runs on MongoDB when MSGAPI_TEST_MONGODB_URI is set.
func TestStalledReaperKeepsTheTakersLock(t *testing.T) {
	e := newEnv(t)
	uri, dir := storetest.URI(t)
	slow, err := store.Open(context.Background(), store.Options{URI: uri, SQLiteDir: dir, Database: e.s.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Client.Disconnect(context.Background()) })
	held, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow.RoundTrips.Before(func(_ context.Context, ev *event.CommandStartedEvent) {
		if ev.CommandName == "delete" {
			once.Do(func() { close(held); <-gate })
		}
	})

	const lease = 300 * time.Millisecond
	holder := e.guard(Options{Window: 200 * time.Millisecond, Lease: lease})
	d, err := holder.Acquire(e.ctx, key, "msg_1")
	if err != nil || d.Outcome != Won {
		t.Fatalf("Acquire = %v, %v", d.Outcome, err)
	}
	e.write("msg_1", "sent")
	holder.Written("msg_1")
	time.Sleep(300 * time.Millisecond) // the lock expires

	reaper := e.guard(Options{Store: slow, Lease: lease})
	docs := e.expiredLocks(t)
	reaped := make(chan error, 1)
	go func() {
		_, err := reaper.Reap(context.Background(), time.Now(), docs)
		reaped <- err
	}()
	<-held // fenced and claimed; its delete is stalled

	taker := e.guard(Options{Window: time.Minute, Lease: lease, Wait: 3 * time.Second})
	d2, err := taker.Acquire(e.ctx, key, "msg_2")
	if err != nil || d2.Outcome != Won {
		t.Fatalf("taker = %v, %v; want won over the stalled reaper", d2.Outcome, err)
	}
	e.write("msg_2", "sent")
	taker.Written("msg_2")
	close(gate)
	if err := <-reaped; err != nil {
		t.Fatal(err)
	}
	if l, ok := e.lock(d.LockID); !ok || l.MessageID != "msg_2" {
		t.Fatalf("lock %+v (found %v) after the stalled reaper's delete, want the taker's msg_2", l, ok)
	}
	third := e.guard(Options{Window: time.Minute, Lease: lease})
	d3, err := third.Acquire(e.ctx, key, "msg_3")
	if err != nil || d3.Outcome != Duplicate || d3.MessageID != "msg_2" {
		t.Fatalf("third request = %v naming %s, %v; want a duplicate of msg_2 (a win is the second send)", d3.Outcome, d3.MessageID, err)
	}
}

// expiredLocks reads the expired locks as the store's reaper scan does.
func (e *env) expiredLocks(t *testing.T) []bson.Raw {
	t.Helper()
	cur, err := e.s.Collection(locksName).Find(context.Background(), bson.D{{Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: time.Now()}}}})
	if err != nil {
		t.Fatal(err)
	}
	var docs []bson.Raw
	for cur.Next(context.Background()) {
		docs = append(docs, slices.Clone(cur.Current))
	}
	if len(docs) == 0 {
		t.Fatal("no expired lock to reap")
	}
	return docs
}
