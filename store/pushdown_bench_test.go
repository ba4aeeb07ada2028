package store_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

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
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("stored=%d", n), func(b *testing.B) {
			s := storetest.New(b, things)
			ctx := context.Background()
			c := s.Collection("things")
			seed(b, c, n, func(j int) bson.D {
				return bson.D{{Key: "_id", Value: fmt.Sprintf("lock_%09d", j)}, {Key: "messageId", Value: fmt.Sprintf("msg_%d", j)}}
			})
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
}
