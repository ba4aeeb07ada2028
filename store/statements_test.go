package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi/store/storetest"
)

// The embedded engine keeps its SQL statements prepared, by their text, in
// a bounded set (third_party/ferretdb/PATCHES.md, patch 15). What must stay
// true: statements of more texts than the set holds, run from many
// goroutines at once, each answer their own query while others push them
// out of the set (a statement is closed only once no call holds it); a
// collection whose statements are kept can be dropped, and once created
// again its reads and writes see the new table, not the old plan.
func TestKeptStatements(t *testing.T) {
	_, dir := storetest.URI(t)
	if dir == "" {
		t.Skip("kept statements are the embedded engine's; MSGAPI_TEST_MONGODB_URI is set")
	}
	s := storetest.New(t, things)
	c, ctx := s.Collection("things"), context.Background()

	const n = 300 // more distinct texts than the engine keeps (256)
	ids := make([]string, n)
	docs := make([]any, n)
	for i := range n {
		ids[i] = fmt.Sprintf("d%03d", i)
		docs[i] = bson.D{{Key: "_id", Value: ids[i]}, {Key: "v", Value: int32(i)}}
	}
	if _, err := c.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}

	// Reads: _id $in lists of every length from 1 to n (one SQL text per
	// length, pushed down by patch 5) in a different order in each
	// goroutine; inserts of groups of every size up to 40 into another
	// collection (one text per size) at the same time.
	other := s.Collection("others")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 15))
			for _, k := range r.Perm(n) {
				want := ids[:k+1]
				got, err := idsOf(ctx, c, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: want}}}})
				if err != nil {
					errs <- fmt.Errorf("find %d ids: %w", k+1, err)
					return
				}
				if !slices.Equal(got, want) {
					errs <- fmt.Errorf("find %d ids: got %d documents (%v…)", k+1, len(got), got[:min(3, len(got))])
					return
				}
			}
		}()
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for size := 1; size <= 40; size++ {
				batch := make([]any, size)
				for i := range batch {
					batch[i] = bson.D{{Key: "_id", Value: fmt.Sprintf("o%d-%d-%d", g, size, i)}}
				}
				if _, err := other.InsertMany(ctx, batch); err != nil {
					errs <- fmt.Errorf("insert %d: %w", size, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if got, err := other.CountDocuments(ctx, bson.D{}); err != nil || got != 2*40*41/2 {
		t.Fatalf("others: %d documents (err %v), want %d", got, err, 2*40*41/2)
	}

	// Dropped with its statements kept, created again with other
	// documents and an index: the same texts read the new table.
	read := func(id string) (int32, error) {
		var d struct {
			V int32 `bson:"v"`
		}
		err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
		return d.V, err
	}
	if v, err := read("d007"); err != nil || v != 7 {
		t.Fatalf("read d007: %d, %v", v, err)
	}
	if err := c.Drop(ctx); err != nil {
		t.Fatalf("drop a collection whose statements are kept: %v", err)
	}
	if _, err := read("d007"); err != mongo.ErrNoDocuments {
		t.Fatalf("read d007 after the drop: %v, want no documents", err)
	}
	if _, err := c.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "v", Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "d007"}, {Key: "v", Value: int32(70)}},
		bson.D{{Key: "_id", Value: "d008"}, {Key: "v", Value: int32(80)}},
	}); err != nil {
		t.Fatal(err)
	}
	if v, err := read("d007"); err != nil || v != 70 {
		t.Fatalf("read d007 from the new collection: %d, %v; want 70", v, err)
	}
	got, err := idsOf(ctx, c, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids[:10]}}}})
	if err != nil || !slices.Equal(got, []string{"d007", "d008"}) {
		t.Fatalf("find 10 ids in the new collection: %v, %v; want [d007 d008]", got, err)
	}
}

// idsOf returns the _ids of the documents filter matches, in _id order.
func idsOf(ctx context.Context, c *mongo.Collection, filter bson.D) ([]string, error) {
	cur, err := c.Find(ctx, filter)
	if err != nil {
		return nil, err
	}
	var got []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &got); err != nil {
		return nil, err
	}
	out := make([]string, len(got))
	for i, d := range got {
		out[i] = d.ID
	}
	slices.Sort(out)
	return out, nil
}
