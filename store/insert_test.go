package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// An unordered insert whose documents include some that lose to an existing
// _id — group commit (batch.go) sends the inserts of a duplicate storm
// together — inserts every other document and reports exactly the losers,
// at their indexes, over more documents than the engine puts in one SQL
// statement (100), and whatever the earlier holders of those _ids hold stays.
func TestUnorderedInsertReportsExactlyTheDuplicates(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	c := s.Collection("things")
	taken := []string{"d000", "d099", "d100", "d150", "d255"}
	for _, id := range taken {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "by", Value: "earlier"}}); err != nil {
			t.Fatal(err)
		}
	}
	var docs []any
	for i := range 256 {
		docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("d%03d", i)}, {Key: "by", Value: "batch"}})
	}
	// The same new _id twice in one command: the second loses to the first.
	docs = append(docs, bson.D{{Key: "_id", Value: "d010"}, {Key: "by", Value: "second"}})
	wantLosers := []int{0, 99, 100, 150, 255, 256}

	res, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) {
		t.Fatalf("InsertMany: %v, want a bulk write exception", err)
	}
	var losers []int
	for _, we := range bwe.WriteErrors {
		if !mongo.IsDuplicateKeyError(we) {
			t.Errorf("write error at %d: %v, want a duplicate key error", we.Index, we)
		}
		losers = append(losers, we.Index)
	}
	slices.Sort(losers)
	if !slices.Equal(losers, wantLosers) {
		t.Errorf("duplicate key errors at %v, want %v", losers, wantLosers)
	}
	if res == nil || len(res.InsertedIDs) != len(docs)-len(wantLosers) {
		t.Errorf("inserted %v, want %d ids", res, len(docs)-len(wantLosers))
	}
	if n, err := c.CountDocuments(ctx, bson.D{}); err != nil || n != 256 {
		t.Errorf("%d documents stored (%v), want 256", n, err)
	}
	for id, by := range map[string]string{"d000": "earlier", "d150": "earlier", "d255": "earlier", "d010": "batch", "d001": "batch", "d254": "batch"} {
		var got struct{ By string }
		if err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&got); err != nil || got.By != by {
			t.Errorf("%s: by %q (%v), want %q", id, got.By, err, by)
		}
	}
}

// An ordered insert still stops at its first duplicate: the documents
// before it are stored, none after it.
func TestOrderedInsertStopsAtTheFirstDuplicate(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	c := s.Collection("things")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "b"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.InsertMany(ctx, []any{bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "_id", Value: "b"}}, bson.D{{Key: "_id", Value: "c"}}})
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || len(bwe.WriteErrors) != 1 || bwe.WriteErrors[0].Index != 1 {
		t.Fatalf("InsertMany: %v, want one duplicate key error at index 1", err)
	}
	for id, want := range map[string]int64{"a": 1, "b": 1, "c": 0} {
		if n, err := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}}); err != nil || n != want {
			t.Errorf("%s stored %d times (%v), want %d", id, n, err, want)
		}
	}
}

// On the embedded engine an unordered insert with duplicates commits its
// other documents in one transaction (third_party/ferretdb/PATCHES.md,
// patch 3), as without duplicates: a reader sees none of them or all.
// Upstream retries each document in a transaction of its own, and a reader
// counting meanwhile sees them arrive one by one. (The engine runs an
// insert command in transactions of up to 100 documents, duplicates or not:
// this one has 91.)
func TestUnorderedInsertWithDuplicatesCommitsAtOnce(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB's unordered insert is not atomic, nor asked to be")
		return
	}
	s := storetest.New(t, things)
	ctx := context.Background()
	c := s.Collection("things")
	if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: "taken"}}); err != nil {
		t.Fatal(err)
	}
	const n = 90
	for round := range 5 {
		docs := []any{bson.D{{Key: "_id", Value: "taken"}}}
		for i := range n {
			docs = append(docs, bson.D{{Key: "_id", Value: fmt.Sprintf("r%d-%03d", round, i)}, {Key: "round", Value: round}})
		}
		var (
			wg      sync.WaitGroup
			done    = make(chan struct{})
			partial []int64
		)
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				k, err := c.CountDocuments(ctx, bson.D{{Key: "round", Value: round}})
				if err != nil {
					t.Error(err)
					return
				}
				if k != 0 && k != n {
					partial = append(partial, k)
				}
			}
		})
		_, err := c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
		close(done)
		wg.Wait()
		if !mongo.IsDuplicateKeyError(err) {
			t.Fatalf("round %d: InsertMany: %v, want the one duplicate", round, err)
		}
		if len(partial) > 0 {
			t.Fatalf("round %d: a reader saw %v of the %d documents: not one transaction", round, partial[:min(len(partial), 5)], n)
		}
	}
}

// The embedded engine's msgapiWrite (third_party/ferretdb/PATCHES.md,
// patch 6) answers as an unordered insert would, with indexes that count
// the documents of all its collections in order: a document that loses to
// an existing _id, one repeated within the command and one the engine
// refuses are each reported at their own index, and everything else is
// stored.
func TestGroupWriteCommandReportsByIndex(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB has no msgapiWrite, and msgapi sends it none")
		return
	}
	colls := []store.Collection{{Name: "alpha"}, {Name: "beta"}}
	s := storetest.New(t, colls...)
	ctx := context.Background()
	if _, err := s.Collection("beta").InsertOne(ctx, bson.D{{Key: "_id", Value: "taken"}}); err != nil {
		t.Fatal(err)
	}
	cmd := bson.D{{Key: store.GroupWriteCommand, Value: 1}, {Key: "inserts", Value: bson.A{
		bson.D{{Key: "collection", Value: "alpha"}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: "a1"}},                          // 0
			bson.D{{Key: "_id", Value: "a1"}},                          // 1: repeated
			bson.D{{Key: "_id", Value: "a2"}, {Key: "$bad", Value: 1}}, // 2: refused
		}}},
		bson.D{{Key: "collection", Value: "beta"}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: "taken"}}, // 3: exists
			bson.D{{Key: "_id", Value: "b1"}},    // 4
		}}},
	}}}
	err := s.DB.RunCommand(ctx, cmd).Err()
	var wex mongo.WriteException
	if !errors.As(err, &wex) {
		t.Fatalf("msgapiWrite: %v, want write errors", err)
	}
	got := map[int]bool{}
	for _, we := range wex.WriteErrors {
		got[we.Index] = we.HasErrorCode(11000)
	}
	if want := map[int]bool{1: true, 2: false, 3: true}; !maps.Equal(got, want) {
		t.Errorf("write errors at %v (index → duplicate key), want %v", got, want)
	}
	for coll, want := range map[string][]string{"alpha": {"a1"}, "beta": {"b1", "taken"}} {
		var docs []struct {
			ID string `bson:"_id"`
		}
		cur, err := s.Collection(coll).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range docs {
			ids = append(ids, d.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Errorf("%s holds %v, want %v", coll, ids, want)
		}
	}
}

// msgapiWrite's replaces (PATCHES.md, patch 8): each replaces the document
// its filter matches, or reports that none did, and sees what the command
// wrote before it — its inserts and its earlier replaces — because it reads
// within the command's transaction. Two replaces of one generation in one
// command: exactly one matches. A replacement that names another _id is
// refused at its own index, after the inserts' indexes.
func TestGroupWriteCommandReplaces(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB has no msgapiWrite, and msgapi sends it none")
		return
	}
	s := storetest.New(t, store.Collection{Name: "alpha"})
	ctx := context.Background()
	c := s.Collection("alpha")
	for _, id := range []string{"r1", "r2"} {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "token", Value: "t0"}}); err != nil {
			t.Fatal(err)
		}
	}
	rep := func(filter, replacement bson.D) bson.D {
		return bson.D{{Key: "collection", Value: "alpha"}, {Key: "filter", Value: filter}, {Key: "replacement", Value: replacement}}
	}
	gen := func(id, token string) bson.D { return bson.D{{Key: "_id", Value: id}, {Key: "token", Value: token}} }
	cmd := bson.D{{Key: store.GroupWriteCommand, Value: 1},
		{Key: "inserts", Value: bson.A{bson.D{{Key: "collection", Value: "alpha"}, {Key: "documents", Value: bson.A{
			bson.D{{Key: "_id", Value: "new"}, {Key: "v", Value: 1}}, // index 0
		}}}}},
		{Key: "replaces", Value: bson.A{
			rep(gen("r1", "t0"), gen("r1", "t1")),                                 // index 1: matches
			rep(gen("r1", "t0"), gen("r1", "t2")),                                 // index 2: r1 is t1 now
			rep(bson.D{{Key: "_id", Value: "new"}}, bson.D{{Key: "v", Value: 2}}), // index 3: the insert above
			rep(gen("missing", "t0"), gen("missing", "t1")),                       // index 4: nothing
			rep(gen("r2", "t0"), gen("other", "t1")),                              // index 5: another _id, refused
		}},
	}
	reply, err := s.DB.RunCommand(ctx, cmd).Raw()
	var wex mongo.WriteException
	if !errors.As(err, &wex) {
		t.Fatalf("msgapiWrite: %v, want one write error", err)
	}
	if len(wex.WriteErrors) != 1 || wex.WriteErrors[0].Index != 5 || !wex.WriteErrors[0].HasErrorCode(66) { // ImmutableField
		t.Errorf("write errors %v, want one ImmutableField (66) at index 5", wex.WriteErrors)
	}
	if reply == nil {
		reply = wex.Raw
	}
	var got struct {
		N       int32   `bson:"n"`
		Matched []int32 `bson:"matched"`
	}
	if err := bson.Unmarshal(reply, &got); err != nil {
		t.Fatal(err)
	}
	if want := []int32{1, 0, 1, 0, 0}; got.N != 1 || !slices.Equal(got.Matched, want) {
		t.Errorf("n %d, matched %v; want n 1, matched %v", got.N, got.Matched, want)
	}
	for id, want := range map[string]bson.M{"r1": {"_id": "r1", "token": "t1"}, "r2": {"_id": "r2", "token": "t0"}, "new": {"_id": "new", "v": int32(2)}} {
		var doc bson.M
		if err := c.FindOne(ctx, store.ByID(id)).Decode(&doc); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if !maps.Equal(doc, want) {
			t.Errorf("%s is %v, want %v", id, doc, want)
		}
	}
	if n, err := c.CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Errorf("alpha holds %d documents (%v), want 3: no replace inserts", n, err)
	}

	// A replace whose filter names no _id would be a scan: the whole
	// command is refused, and nothing of it written.
	bad := bson.D{{Key: store.GroupWriteCommand, Value: 1},
		{Key: "inserts", Value: bson.A{bson.D{{Key: "collection", Value: "alpha"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: "not-written"}}}}}}},
		{Key: "replaces", Value: bson.A{rep(bson.D{{Key: "token", Value: "t0"}}, bson.D{{Key: "token", Value: "t9"}})}},
	}
	if err := s.DB.RunCommand(ctx, bad).Err(); err == nil {
		t.Error("a replace without _id in its filter was accepted")
	}
	if n, err := c.CountDocuments(ctx, bson.D{}); err != nil || n != 3 {
		t.Errorf("alpha holds %d documents (%v) after the refused command, want 3", n, err)
	}
}
