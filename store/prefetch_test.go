package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

var others = store.Collection{Name: "others"}

// msgapiGet (third_party/ferretdb/PATCHES.md, patch 12) answers one entry
// per get, in order: the document, or null when the collection has none
// with that _id or does not exist; and it refuses malformed gets with the
// engine's own errors.
func TestEngineGetCommand(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB has no msgapiGet (Prefetch sends finds there)")
		return
	}
	s := storetest.New(t, things, others)
	ctx := context.Background()
	if _, err := s.Collection("things").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collection("others").InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 2}}); err != nil {
		t.Fatal(err)
	}
	get := func(coll string, id any) bson.D {
		return bson.D{{Key: "collection", Value: coll}, {Key: "id", Value: id}}
	}
	var res struct {
		Documents []bson.RawValue `bson:"documents"`
	}
	cmd := bson.D{{Key: store.GetCommand, Value: 1}, {Key: "gets", Value: bson.A{
		get("others", "a"), get("things", "missing"), get("things", "a"), get("never_created", "a"),
	}}}
	if err := s.DB.RunCommand(ctx, cmd).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Documents) != 4 {
		t.Fatalf("%d documents, want 4", len(res.Documents))
	}
	want := []int32{2, 0, 1, 0} // n of each; 0: null
	for i, v := range res.Documents {
		if want[i] == 0 {
			if v.Type != bson.TypeNull {
				t.Errorf("get %d: %s, want null", i, v)
			}
			continue
		}
		if n, ok := v.Document().Lookup("n").Int32OK(); !ok || n != want[i] {
			t.Errorf("get %d: %s, want n %d", i, v, want[i])
		}
	}

	many := bson.A{}
	for range store.PrefetchMax + 1 {
		many = append(many, get("things", "a"))
	}
	for _, tc := range []struct {
		name string
		gets any
		msg  string
	}{
		{"too many gets", many, "at most 16"},
		{"an id that is not a string", bson.A{get("things", 7)}, "gets.0.id must be a string"},
		{"no collection", bson.A{bson.D{{Key: "id", Value: "a"}}}, "collection"},
		{"a get that is not a document", bson.A{"things"}, "gets.0 is not a document"},
		{"no gets", nil, "gets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bson.D{{Key: store.GetCommand, Value: 1}}
			if tc.gets != nil {
				c = append(c, bson.E{Key: "gets", Value: tc.gets})
			}
			err := s.DB.RunCommand(ctx, c).Err()
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want one that says %q", err, tc.msg)
			}
		})
	}
}

// A prefetch reads its documents in one round trip on the embedded engine
// (finds side by side on MongoDB), and each prefetched document answers
// the first FindByID of it only: a second read, a document not prefetched
// and a read after PrefetchMaxAge go to the store and see what it holds now.
func TestPrefetch(t *testing.T) {
	_, dir := storetest.URI(t)
	embedded := dir != ""
	s := storetest.New(t, things, others)
	ctx := context.Background()
	things, others := s.Collection("things"), s.Collection("others")
	for _, id := range []string{"a", "b"} {
		if _, err := things.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "v", Value: "before"}}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(id, v string) {
		t.Helper()
		if _, err := things.UpdateOne(ctx, store.ByID(id), bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: v}}}}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(ctx context.Context, id string) (v string, found bool, trips int64) {
		t.Helper()
		before := s.RoundTrips.Total()
		var d struct {
			V string `bson:"v"`
		}
		err := store.FindByID(ctx, things, id).Decode(&d)
		trips = s.RoundTrips.Total() - before
		if store.IsNotFound(err) {
			return "", false, trips
		}
		if err != nil {
			t.Fatal(err)
		}
		return d.V, true, trips
	}

	before := s.RoundTrips.Total()
	pctx := s.Prefetch(ctx, store.Doc{Collection: "things", ID: "a"}, store.Doc{Collection: "things", ID: "gone"},
		store.Doc{Collection: "others", ID: "a"})
	wantTrips := int64(1)
	if !embedded {
		wantTrips = 3
	}
	if n := s.RoundTrips.Total() - before; n != wantTrips {
		t.Errorf("the prefetch cost %d round trips, want %d", n, wantTrips)
	}
	set("a", "after")
	set("b", "after")

	if v, found, trips := read(pctx, "a"); v != "before" || !found || trips != 0 {
		t.Errorf("first read of a prefetched document: %q %v in %d round trips, want the prefetched %q in 0", v, found, trips, "before")
	}
	if v, _, trips := read(pctx, "a"); v != "after" || trips != 1 {
		t.Errorf("second read: %q in %d round trips, want the store's %q in 1", v, trips, "after")
	}
	if _, found, trips := read(pctx, "gone"); found || trips != 0 {
		t.Errorf("a prefetched absence: found %v in %d round trips, want not found in 0", found, trips)
	}
	if v, _, trips := read(pctx, "b"); v != "after" || trips != 1 {
		t.Errorf("a document not prefetched: %q in %d round trips, want the store's %q in 1", v, trips, "after")
	}
	// The same _id in another collection is another document.
	var o struct{}
	before = s.RoundTrips.Total()
	if err := store.FindByID(pctx, others, "a").Decode(&o); !store.IsNotFound(err) || s.RoundTrips.Total() != before {
		t.Errorf("others/a: %v in %d round trips, want the prefetched absence in 0", err, s.RoundTrips.Total()-before)
	}

	// Too old: read afresh.
	old := s.Prefetch(ctx, store.Doc{Collection: "things", ID: "a"})
	set("a", "later")
	time.Sleep(store.PrefetchMaxAge + 50*time.Millisecond)
	if v, _, trips := read(old, "a"); v != "later" || trips != 1 {
		t.Errorf("a read %v after the prefetch: %q in %d round trips, want the store's %q in 1", store.PrefetchMaxAge+50*time.Millisecond, v, trips, "later")
	}

	// MongoDB's way (finds side by side) reads what the prefetch read, on
	// whichever engine this runs.
	docs := []store.Doc{{Collection: "things", ID: "a"}, {Collection: "things", ID: "gone"}, {Collection: "others", ID: "a"}, {Collection: "things", ID: "b"}}
	raws, err := store.GetEachFinds(ctx, s, docs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"later", "", "", "after"} {
		got := ""
		if raws[i] != nil {
			got = raws[i].Lookup("v").StringValue()
		}
		if got != want || (raws[i] == nil) != (want == "") {
			t.Errorf("finds side by side, %v: %q (found %v), want %q", docs[i], got, raws[i] != nil, want)
		}
	}

	// A prefetch that fails leaves the context as it was.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if got := s.Prefetch(canceled, store.Doc{Collection: "things", ID: "a"}); got != canceled {
		t.Error("a failed prefetch returned a new context")
	}
}
