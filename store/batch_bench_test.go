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

// BenchmarkGroupCommand is one group write as a send makes it on the
// embedded engine: a msgapiWrite command (Batch) carrying 8 documents of
// a send's shapes, one caller at a time, with the driver and the engine in
// this process, so -benchmem counts both. Unlike InsertMany above, which
// puts its documents in a separate section of the wire message, the whole
// command is the message's first section, which the engine's connection
// reads for its comment before the handler reads it (PATCHES.md, patch 13).
//
//	go test -run '^$' -bench GroupCommand -benchtime 2000x -benchmem ./store/
func BenchmarkGroupCommand(b *testing.B) {
	s := storetest.New(b, things)
	batch, ctx := s.Batch("things"), context.Background()
	at := time.Now()
	b.ResetTimer()
	for i := range b.N {
		docs := make([]any, 8)
		for j := range docs {
			docs[j] = bson.D{{Key: "_id", Value: fmt.Sprintf("d%09d_%d", i, j)}, {Key: "workspaceId", Value: "ws_bench"},
				{Key: "leadId", Value: "lead_bench"}, {Key: "channel", Value: "sms"}, {Key: "status", Value: "sending"},
				{Key: "body", Value: "Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out."},
				{Key: "createdAt", Value: at}, {Key: "expiresAt", Value: at.Add(15 * time.Minute)}}
		}
		errs, err := batch.Insert(ctx, docs...)
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
