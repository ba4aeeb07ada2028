package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// What one reaper pass costs when nothing has expired, against how many
// live documents the collection holds. On the embedded engine the scan
// for expired documents used to read every document of the collection
// (about 80 µs each); through the expiry index it reads none (expiry.go).
//
//	go test -run '^$' -bench ReapPass -benchtime 5x ./store/
func BenchmarkReapPass(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("live=%d", n), func(b *testing.B) {
			coll := store.Collection{Name: "log", ExpiresField: "expiresAt"}
			s := storetest.New(b, coll)
			ctx := context.Background()
			later := time.Now().Add(30 * 24 * time.Hour)
			seed(b, s.Collection("log"), n, func(j int) bson.D {
				return bson.D{{Key: "_id", Value: fmt.Sprintf("evt_%09d", j)}, {Key: "type", Value: "message.sent"},
					{Key: "payload", Value: bson.D{{Key: "id", Value: fmt.Sprintf("msg_%09d", j)}, {Key: "status", Value: "sent"},
						{Key: "body", Value: "Your appointment is confirmed for tomorrow at 3pm. Reply STOP to opt out."}}},
					{Key: "createdAt", Value: time.Now()}, {Key: "expiresAt", Value: later}}
			})
			b.ResetTimer()
			for b.Loop() {
				if n, err := s.Reap(ctx, time.Now()); err != nil || n != 0 {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// seed inserts n documents, doc(0) … doc(n-1), a thousand to a command.
func seed(b *testing.B, c *mongo.Collection, n int, doc func(i int) bson.D) {
	b.Helper()
	for i := 0; i < n; i += 1000 {
		docs := make([]any, 0, 1000)
		for j := i; j < min(n, i+1000); j++ {
			docs = append(docs, doc(j))
		}
		if _, err := c.InsertMany(context.Background(), docs, options.InsertMany().SetOrdered(false)); err != nil {
			b.Fatal(err)
		}
	}
}
