package store_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// Every write command the driver sends queues for the process's one write
// slot, and no read does: with the slot held, each read below answers and
// each write times out waiting; released, the same writes go through.
func TestWritesQueueForTheSlotAndReadsDoNot(t *testing.T) {
	s := storetest.New(t, things)
	if os.Getenv("MSGAPI_TEST_MONGODB_URI") != "" {
		if s.SerialWrites() {
			t.Fatal("writes are serialised on MongoDB")
		}
		t.Skip("MongoDB: no write gate") // the embedded engine is what CI runs
	}
	if !s.SerialWrites() {
		t.Fatal("the embedded engine's writes are not serialised")
	}
	ctx := context.Background()
	c := s.Collection("things")
	if _, err := c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "_id", Value: "c"}}}); err != nil {
		t.Fatal(err)
	}

	release := store.HoldWriteGate(s)
	reads := map[string]func(context.Context) error{
		"find by _id": func(ctx context.Context) error { return c.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Err() },
		"find with getMore": func(ctx context.Context) error {
			cur, err := c.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
			if err != nil {
				return err
			}
			var all []bson.M
			if err := cur.All(ctx, &all); err != nil {
				return err
			}
			if len(all) != 3 {
				return errors.New("not every document read")
			}
			return nil
		},
		"count":           func(ctx context.Context) error { _, err := c.CountDocuments(ctx, bson.D{}); return err },
		"ping":            s.Ping,
		"listCollections": func(ctx context.Context) error { _, err := s.DB.ListCollectionNames(ctx, bson.D{}); return err },
	}
	for name, read := range reads {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := read(ctx); err != nil {
			t.Errorf("%s with the write slot held: %v", name, err)
		}
		cancel()
	}
	writes := map[string]func(context.Context) error{
		"insert": func(ctx context.Context) error {
			_, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "d"}})
			return err
		},
		"insert many": func(ctx context.Context) error {
			_, err := c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "e"}}, bson.D{{Key: "_id", Value: "f"}}})
			return err
		},
		"update": func(ctx context.Context) error {
			_, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}})
			return err
		},
		"delete": func(ctx context.Context) error {
			_, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: "b"}})
			return err
		},
		"bulk delete": func(ctx context.Context) error {
			_, err := c.BulkWrite(ctx, []mongo.WriteModel{mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: "c"}})})
			return err
		},
		"create index": func(ctx context.Context) error {
			_, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "n", Value: 1}}})
			return err
		},
	}
	for name, write := range writes {
		ctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		err := write(ctx)
		cancel()
		if !mongo.IsTimeout(err) {
			t.Errorf("%s with the write slot held: %v, want a timeout while it queues", name, err)
		}
	}
	release()
	for name, write := range writes {
		if err := write(ctx); err != nil {
			t.Errorf("%s after the slot was released: %v", name, err)
		}
	}
	n, err := c.CountDocuments(ctx, bson.D{})
	if err != nil || n != 4 { // a, d, e, f
		t.Errorf("%d documents (%v) after the writes, want 4", n, err)
	}
	// What the queue cost is counted: every write above (the first insert,
	// the six that went through and the slot taken by hand; the six that
	// timed out never got it), their waits and the writer's busy time.
	w := s.WriterStats()
	// (Each timed-out write queued for most of its 150 ms; the driver spent
	// the rest before writing.)
	if w.Commands < 8 || w.Wait < time.Duration(len(writes))*100*time.Millisecond || w.Busy <= 0 {
		t.Errorf("writer stats %+v, want at least 8 commands, %d × 100 ms of waiting and some busy time", w, len(writes))
	}
}

// A write whose caller gives up while it queues leaves the queue at once
// (the driver closes its connection) and writes nothing.
func TestAQueuedWriteCanBeCancelled(t *testing.T) {
	s := storetest.New(t, things)
	if !s.SerialWrites() {
		t.Skip("MongoDB: no write gate")
	}
	release := store.HoldWriteGate(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "cancelled"}})
		done <- err
	}()
	waitQueued(t, 1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled queued insert: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled write stayed in the queue")
	}
	release()
	n, err := s.Collection("things").CountDocuments(context.Background(), bson.D{})
	if err != nil || n != 0 {
		t.Errorf("%d documents (%v), want 0: the cancelled insert must not be written", n, err)
	}
}

// The slot is handed out first come, first served, whatever the number of
// waiters: the fairness SQLite's busy handler lacks.
func TestWriteGateIsFirstComeFirstServed(t *testing.T) {
	g := store.NewGate()
	if err := g.Acquire(time.Time{}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Acquire(time.Time{}); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			g.Release()
		}()
		waitQueued(t, i+1) // i is in the queue before i+1 arrives
	}
	g.Release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("admitted in order %v, want 0…%d", order, n-1)
		}
	}
}

func TestWriteGateWaitEndsAtTheDeadline(t *testing.T) {
	g := store.NewGate()
	if err := g.Acquire(time.Time{}); err != nil {
		t.Fatal(err)
	}
	err := g.Acquire(time.Now().Add(20 * time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("acquire past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	g.Release()
	if err := g.Acquire(time.Now().Add(time.Second)); err != nil {
		t.Fatalf("acquire of a free slot: %v", err)
	}
}

// waitQueued waits until n goroutines wait for a write slot.
func waitQueued(t *testing.T, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		queued := 0
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "store.(*writeGate).acquire") {
				queued++
			}
		}
		if queued == n {
			return
		}
	}
	t.Fatalf("%d writers never queued", n)
}

// Background work yields to queued request writes: while one waits, Yield
// waits too (up to its bound); with nobody queued it returns at once.
func TestYieldWaitsForQueuedWrites(t *testing.T) {
	s := storetest.New(t, things)
	if !s.SerialWrites() {
		t.Skip("MongoDB: no write gate")
	}
	ctx := context.Background()
	if err := s.Yield(ctx); err != nil {
		t.Fatal(err)
	}
	release := store.HoldWriteGate(s)
	done := make(chan error, 1)
	go func() {
		_, err := s.Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "queued"}})
		done <- err
	}()
	waitQueued(t, 1)
	start := time.Now()
	if err := s.Yield(ctx); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("Yield returned after %s with a write queued, want its whole bound of 100 ms", waited)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Yield(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Yield with a cancelled context: %v", err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
