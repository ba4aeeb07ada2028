package store_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// The reaper finds expired documents through the expiry index on the
// embedded engine: its scan does not read the live ones (expiry.go).
func TestReaperScanUsesTheExpiryIndex(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB indexes expiresAt itself")
		return
	}
	s := storetest.New(t, things)
	plan, err := store.ExpiredPlan(context.Background(), s, things)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "USING INDEX") || !strings.Contains(plan, "_msgapi_exp") {
		t.Fatalf("query plan of the reaper's scan:\n%s\nwant it to use the _msgapi_exp index", plan)
	}
}

// The reaper deletes what {expiresAt: {$lte: now}} matches and nothing
// else: a date at or before now, whatever the _id's type; not a later date,
// not a missing field, not a value of another type that merely compares
// lower.
func TestReaperDeletesExactlyTheExpiredDates(t *testing.T) {
	s := storetest.New(t, things)
	if len(s.Reaped()) == 0 {
		t.Log("store has TTL indexes; the reaper is not needed")
		return
	}
	ctx := context.Background()
	now := time.Now()
	oid := bson.NewObjectID()
	expired := []any{"past", oid, "exactly-now"}
	_, err := s.Collection("things").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "past"}, {Key: "expiresAt", Value: now.Add(-time.Hour)}},
		bson.D{{Key: "_id", Value: oid}, {Key: "expiresAt", Value: now.Add(-time.Second)}},
		bson.D{{Key: "_id", Value: "exactly-now"}, {Key: "expiresAt", Value: now.Truncate(time.Millisecond)}},
		bson.D{{Key: "_id", Value: "future"}, {Key: "expiresAt", Value: now.Add(time.Second)}},
		bson.D{{Key: "_id", Value: "no-expiry"}},
		bson.D{{Key: "_id", Value: "a-number"}, {Key: "expiresAt", Value: int64(0)}},
		bson.D{{Key: "_id", Value: "a-string"}, {Key: "expiresAt", Value: "2000-01-01"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Reap(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(expired)) {
		t.Errorf("reaped %d documents, want %d", n, len(expired))
	}
	for _, id := range expired {
		if c, _ := s.Collection("things").CountDocuments(ctx, bson.D{{Key: "_id", Value: id}}); c != 0 {
			t.Errorf("expired %v still stored", id)
		}
	}
	if left, _ := s.Collection("things").CountDocuments(ctx, bson.D{}); left != 4 {
		t.Errorf("%d documents left, want 4 (future, no-expiry, a-number, a-string)", left)
	}
}

// An owned collection's reaper gets, from the embedded engine's file, each
// expired document's _id, expiry and declared ReapFields (strings only);
// nothing of a live one.
func TestOwnedReaperGetsItsFields(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: the scan reads whole documents")
		return
	}
	owned := store.Collection{Name: "claims", ExpiresField: "expiresAt", Owned: true, ReapFields: []string{"owner", "gen"}}
	s := storetest.New(t, owned)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	var got []bson.Raw
	s.ReapWith("claims", func(ctx context.Context, now time.Time, docs []bson.Raw) (int64, error) {
		got = append(got, docs...)
		return int64(len(docs)), nil
	})
	_, err := s.Collection("claims").InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "a"}, {Key: "owner", Value: "ann"}, {Key: "gen", Value: int32(7)}, {Key: "secret", Value: "x"}, {Key: "expiresAt", Value: now.Add(-time.Minute)}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "owner", Value: "bob"}, {Key: "expiresAt", Value: now.Add(time.Minute)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reap(ctx, now); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("reaper got %d documents, want 1 (a)", len(got))
	}
	var doc bson.D
	if err := bson.Unmarshal(got[0], &doc); err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: "a"}, {Key: "expiresAt", Value: bson.DateTime(now.Add(-time.Minute).UnixMilli())}, {Key: "owner", Value: "ann"}}
	if !reflect.DeepEqual(doc, want) {
		t.Errorf("reaper got %v, want %v (gen is not a string, secret not declared)", doc, want)
	}
}
