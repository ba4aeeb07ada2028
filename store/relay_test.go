package store_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// Reproduces RELIABILITY.md's finding 5 at the store: two processes (two
// clients, each with its own write queue) run 8 concurrent compare-and-swaps
// on one document, {_id, v: n} → v: n+1. Exactly one may win each round.
// Before the relay the embedded engine ran them side by side and more than
// one won in most rounds; MongoDB decides them atomically.
func TestConditionalUpdateOneWinnerAcrossProcesses(t *testing.T) {
	a := storetest.New(t, things)
	clients := []*store.Store{a, storetest.Second(t, a)}
	ctx := context.Background()
	c := a.Collection("things")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "cas"}, {Key: "v", Value: 0}}); err != nil {
		t.Fatal(err)
	}
	const rounds, n = 30, 8
	bad := 0
	for round := range rounds {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			mu    sync.Mutex
			won   int
		)
		for i := range n {
			wg.Go(func() {
				<-start
				filter := bson.D{{Key: "_id", Value: "cas"}, {Key: "v", Value: round}}
				res, err := clients[i%2].Collection("things").UpdateOne(ctx, filter, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				won += int(res.ModifiedCount)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if won != 1 {
			bad++
		}
		// Whatever happened, the next round starts from v = round+1.
		if _, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "cas"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: round + 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d rounds had a number of winners other than 1", bad, rounds)
	}
}

// Reproduces the review's N1: a conditional delete whose caller times out
// while the engine still runs it must not land after a later write was told
// it won. The delete (its _id inside an $or, which the engine does not push
// down, so it reads the whole collection first) times out at the client;
// an update by _id then reports
// that it matched the document; the delete must not remove it afterwards.
// Before the relay the process's write queue gave its slot back at the
// timeout and the delete landed last in nearly every round.
func TestTimedOutDeleteDoesNotLandAfterALaterWrite(t *testing.T) {
	s := storetest.New(t, things)
	if os.Getenv("MSGAPI_TEST_MONGODB_URI") != "" {
		t.Skip("MongoDB runs a conditional delete atomically; the race is the embedded engine's")
	}
	ctx := context.Background()
	c := s.Collection("things")
	filler := make([]any, 3000)
	for i := range filler {
		filler[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("f%04d", i)}, {Key: "pad", Value: fmt.Sprintf("%0200d", i)}}
	}
	if _, err := c.InsertMany(ctx, filler); err != nil {
		t.Fatal(err)
	}
	const rounds = 10
	late, tried := 0, 0
	for round := range rounds {
		id := fmt.Sprintf("lock%d", round)
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "owner", Value: "a"}}); err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		_, derr := c.DeleteOne(dctx, bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "_id", Value: id}}}}, {Key: "owner", Value: "a"}})
		cancel()
		if !mongo.IsTimeout(derr) {
			continue // the delete answered in time: nothing to judge this round
		}
		tried++
		res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: "b"}}}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // let a delete still running finish
		err = c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne()).Err()
		if res.MatchedCount == 1 && store.IsNotFound(err) {
			late++
		}
	}
	t.Logf("%d rounds with a timed-out delete", tried)
	if tried == 0 {
		t.Fatal("no delete timed out: the test proves nothing on this machine")
	}
	if late > 0 {
		t.Fatalf("in %d of %d rounds a timed-out delete removed the document after a later update was told it matched", late, tried)
	}
}
