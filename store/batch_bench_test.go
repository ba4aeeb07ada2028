package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// What one write command costs on the store, per document, one command at
// a time: the figures behind group commit (batch.go) and behind writing an
// outcome as an insert rather than an update (messages/outcome.go). On the
// embedded engine a command is a SQLite transaction with its commit; an
// insert command's documents share it, an update's or a delete's
// statements each have their own.
//
//	go test -run '^$' -bench WriteCommand -benchtime 2000x ./store/
func BenchmarkWriteCommand(b *testing.B) {
	doc := func(id string) bson.D {
		return bson.D{{Key: "_id", Value: id}, {Key: "workspaceId", Value: "ws_bench"}, {Key: "status", Value: "sending"},
			{Key: "body", Value: "Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out."}, {Key: "at", Value: time.Now()}}
	}
	for _, k := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("insert/docs-per-command=%d", k), func(b *testing.B) {
			s := storetest.New(b, things)
			c, ctx := s.Collection("things"), context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += k {
				docs := make([]any, k)
				for j := range docs {
					docs[j] = doc(fmt.Sprintf("d%09d", i+j))
				}
				if _, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// One document of each command loses to an existing _id, as in a
	// duplicate storm, where the identical requests' lock inserts travel
	// in one command.
	for _, k := range []int{4, 16} {
		b.Run(fmt.Sprintf("insert-one-duplicate/docs-per-command=%d", k), func(b *testing.B) {
			s := storetest.New(b, things)
			c, ctx := s.Collection("things"), context.Background()
			if _, err := c.InsertOne(ctx, doc("taken")); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += k {
				docs := []any{doc("taken")}
				for j := 1; j < k; j++ {
					docs = append(docs, doc(fmt.Sprintf("d%09d", i+j)))
				}
				_, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
				var bwe mongo.BulkWriteException
				if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || !mongo.IsDuplicateKeyError(err) {
					b.Fatalf("want exactly one duplicate key error, got %v", err)
				}
			}
		})
	}
	for _, kind := range []string{"update", "delete"} {
		for _, k := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s-by-id/statements-per-command=%d", kind, k), func(b *testing.B) {
				s := storetest.New(b, things)
				c, ctx := s.Collection("things"), context.Background()
				docs := make([]any, b.N)
				for i := range docs {
					docs[i] = doc(fmt.Sprintf("d%09d", i))
				}
				if _, err := c.InsertMany(ctx, docs); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := 0; i < b.N; i += k {
					models := make([]mongo.WriteModel, 0, k)
					for j := i; j < min(i+k, b.N); j++ {
						f := store.ByID(fmt.Sprintf("d%09d", j))
						if kind == "update" {
							models = append(models, mongo.NewUpdateOneModel().SetFilter(f).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: "sent"}}}}))
						} else {
							models = append(models, mongo.NewDeleteOneModel().SetFilter(f))
						}
					}
					if _, err := c.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
