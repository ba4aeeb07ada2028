package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// What a conditional single-document delete costs, {_id, generation}: the
// guard reaper's delete of a lock that must still name the generation it
// claimed. Unpatched, the embedded engine pushed a filter down to SQL only
// when it was exactly {_id}, so this read the whole collection; patched
// (third_party/ferretdb/PATCHES.md), the _id conjunct of any filter is
// pushed down and the rest is checked on the one row it finds.
//
//	go test -run '^$' -bench ConditionalDelete -benchtime 200x ./store/
func BenchmarkConditionalDelete(b *testing.B) {
	atSizes(b, func(j int) bson.D {
		return bson.D{{Key: "_id", Value: fmt.Sprintf("lock_%09d", j)}, {Key: "messageId", Value: fmt.Sprintf("msg_%d", j)}}
	}, func(b *testing.B, ctx context.Context, c *mongo.Collection, n int) {
		if b.N > n {
			b.Fatalf("-benchtime %dx deletes more documents than the %d stored", b.N, n)
		}
		b.ResetTimer()
		for i := range b.N {
			// Spread over the collection (7919 is prime, n a multiple of
			// 1,000, so no document comes twice): a scan that stops at
			// its first match would be cheap for the first documents.
			j := (i * 7919) % n
			res, err := c.DeleteOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("lock_%09d", j)}, {Key: "messageId", Value: fmt.Sprintf("msg_%d", j)}})
			if err != nil || res.DeletedCount != 1 {
				b.Fatal(res, err)
			}
		}
	})
}

// What a read of 20 documents by {_id: {$in: [...]}} costs: a listing page's
// entries and messages, the event dispatcher's delete of what it archived.
// Unpatched, the embedded engine read the whole collection for it; patched
// (PATCHES.md, patch 5), it reads the 20 rows by the _id index.
//
//	go test -run '^$' -bench ReadByIDs -benchtime 200x ./store/
func BenchmarkReadByIDs(b *testing.B) {
	atSizes(b, func(j int) bson.D {
		return bson.D{{Key: "_id", Value: fmt.Sprintf("doc_%09d", j)}, {Key: "n", Value: j}}
	}, func(b *testing.B, ctx context.Context, c *mongo.Collection, n int) {
		b.ResetTimer()
		for i := range b.N {
			ids := make(bson.A, 20)
			for k := range ids {
				ids[k] = fmt.Sprintf("doc_%09d", ((i*20+k)*7919)%n)
			}
			cur, err := c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
			if err != nil {
				b.Fatal(err)
			}
			var docs []bson.Raw
			if err := cur.All(ctx, &docs); err != nil || len(docs) != 20 {
				b.Fatal(len(docs), err)
			}
		}
	})
}

// atSizes runs bench on a fresh collection of 1,000, 10,000 and 100,000
// documents made by doc, one sub-benchmark each.
func atSizes(b *testing.B, doc func(j int) bson.D, bench func(b *testing.B, ctx context.Context, c *mongo.Collection, n int)) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("stored=%d", n), func(b *testing.B) {
			s := storetest.New(b, things)
			c := s.Collection("things")
			seed(b, c, n, doc)
			bench(b, context.Background(), c, n)
		})
	}
}

// BenchmarkFindOneByID is the read the send path makes three times (a
// recipient's consent, the dedup lock, the lead): one document by _id from
// 1,000 like msgapi's, with the driver and the engine in this process, so
// -benchmem counts both. The engine's per-command work (its parameters,
// its cursor, the reply) weighs more here than in a read of many documents.
//
//	go test -run '^$' -bench FindOneByID -benchtime 5000x -benchmem ./store/
func BenchmarkFindOneByID(b *testing.B) {
	s := storetest.New(b, things)
	c, ctx := s.Collection("things"), context.Background()
	seed(b, c, 1_000, func(j int) bson.D {
		return bson.D{{Key: "_id", Value: fmt.Sprintf("lk_%09d", j)}, {Key: "workspaceId", Value: "ws_bench"},
			{Key: "messageId", Value: fmt.Sprintf("msg_%09d", j)}, {Key: "createdAt", Value: time.Now()}, {Key: "expiresAt", Value: time.Now().Add(15 * time.Minute)}}
	})
	b.ResetTimer()
	for i := range b.N {
		var got bson.Raw
		if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("lk_%09d", (i*7919)%1_000)}}).Decode(&got); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrefetch is the send path's one read (store.Prefetch): three
// documents by _id, two of 1,000 present and one absent, in one command
// (msgapiGet on the embedded engine), then each read from the prefetch.
//
//	go test -run '^$' -bench Prefetch -benchtime 5000x -benchmem ./store/
func BenchmarkPrefetch(b *testing.B) {
	s := storetest.New(b, things)
	c := s.Collection("things")
	seed(b, c, 1_000, func(j int) bson.D {
		return bson.D{{Key: "_id", Value: fmt.Sprintf("lk_%09d", j)}, {Key: "workspaceId", Value: "ws_bench"},
			{Key: "messageId", Value: fmt.Sprintf("msg_%09d", j)}, {Key: "createdAt", Value: time.Now()}, {Key: "expiresAt", Value: time.Now().Add(15 * time.Minute)}}
	})
	b.ResetTimer()
	for i := range b.N {
		ids := []string{fmt.Sprintf("lk_%09d", (i*7919)%1_000), fmt.Sprintf("lk_%09d", (i*104729)%1_000), fmt.Sprintf("absent_%d", i)}
		docs := make([]store.Doc, len(ids))
		for j, id := range ids {
			docs[j] = store.Doc{Collection: "things", ID: id}
		}
		ctx := s.Prefetch(context.Background(), docs...)
		for j, id := range ids {
			var got bson.Raw
			err := store.FindByID(ctx, c, id).Decode(&got)
			if (j < 2) != (err == nil) {
				b.Fatalf("%s: %v", id, err)
			}
		}
	}
}
