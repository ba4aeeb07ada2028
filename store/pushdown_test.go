package store_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// The embedded engine pushes the _id conjunct of any filter down to SQL
// (third_party/ferretdb/PATCHES.md, patches 1 and 5) — an _id equal to a
// string or an ObjectID, or $in a list of those — and says so in explain;
// any other filter is still not pushed down.
func TestEmbeddedPushesDownTheIDConjunct(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB plans its own queries")
		return
	}
	s := storetest.New(t, things)
	ctx := context.Background()
	for _, tc := range []struct {
		filter bson.D
		want   bool
	}{
		{bson.D{{Key: "_id", Value: "a"}}, true},
		{bson.D{{Key: "_id", Value: "a"}, {Key: "messageId", Value: "m1"}}, true},
		{bson.D{{Key: "status", Value: "sent"}, {Key: "_id", Value: "a"}, {Key: "$or", Value: bson.A{bson.D{{Key: "x", Value: 1}}, bson.D{{Key: "y", Value: 2}}}}}, true},
		{bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "n", Value: 1}}, true},
		{bson.D{{Key: "messageId", Value: "m1"}}, false},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}}}, true},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", bson.NewObjectID()}}}}, {Key: "messageId", Value: "m1"}}, true},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", 1}}}}}, false},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{}}}}}, false},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a"}}, {Key: "$ne", Value: "b"}}}}, false},
		{bson.D{{Key: "_id", Value: bson.D{{Key: "$nin", Value: bson.A{"a"}}}}}, false},
		{bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "_id", Value: "a"}}, bson.D{{Key: "_id", Value: "b"}}}}}, false},
	} {
		var res bson.M
		err := s.DB.RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: "things"}, {Key: "filter", Value: tc.filter}}}}).Decode(&res)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := res["filterPushdown"].(bool); got != tc.want {
			t.Errorf("filter %v: filterPushdown %v, want %v", tc.filter, res["filterPushdown"], tc.want)
		}
	}
}

// Pushing down the _id conjunct narrows what the engine reads, never what
// matches: the other conditions still decide, for reads and for writes.
func TestConditionsBesideIDStillDecide(t *testing.T) {
	s := storetest.New(t, things)
	ctx := context.Background()
	c := s.Collection("things")
	if _, err := c.InsertMany(ctx, []any{
		bson.D{{Key: "_id", Value: "a"}, {Key: "messageId", Value: "m1"}},
		bson.D{{Key: "_id", Value: "b"}, {Key: "messageId", Value: "m2"}},
	}); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "messageId", Value: "m2"}}); n != 0 {
		t.Errorf("{_id: a, messageId: m2} counted %d, want 0", n)
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "messageId", Value: bson.D{{Key: "$in", Value: bson.A{"m0", "m1"}}}}}); n != 1 {
		t.Errorf("{_id: a, messageId: $in [m0 m1]} counted %d, want 1", n)
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b", "z"}}}}, {Key: "messageId", Value: "m2"}}); n != 1 {
		t.Errorf("{_id: $in [a b z], messageId: m2} counted %d, want 1 (b)", n)
	}
	if n, _ := c.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"b", "a", "z"}}}}}); n != 2 {
		t.Errorf("{_id: $in [b a z]} counted %d, want 2", n)
	}
	// A stale generation deletes nothing; the current one deletes its own
	// document only.
	n, err := s.DeleteEach(ctx, "things", []bson.D{
		{{Key: "_id", Value: "a"}, {Key: "messageId", Value: "m0"}},
		{{Key: "_id", Value: "b"}, {Key: "messageId", Value: "m2"}},
	})
	if err != nil || n != 1 {
		t.Fatalf("DeleteEach deleted %d (%v), want 1 (b)", n, err)
	}
	var left []bson.M
	cur, err := c.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0]["_id"] != "a" {
		t.Errorf("left %v, want only a", left)
	}
	// An update's conditions decide the same way.
	res, err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "messageId", Value: "m9"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	if err != nil || res.MatchedCount != 0 {
		t.Errorf("update of a stale generation matched %v (%v), want 0", res, err)
	}
}

// msgapi's engine names itself (third_party/ferretdb/PATCHES.md, patch 2),
// and a process attached by URI accepts only that FerretDB: any other runs
// conditional writes without the relay, not atomically between processes.
func TestOnlyMsgapisEngineIsAccepted(t *testing.T) {
	if _, dir := storetest.URI(t); dir != "" {
		s := storetest.New(t, things)
		var info bson.M
		if err := s.DB.RunCommand(context.Background(), bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
			t.Fatal(err)
		}
		if info["ferretdbVersion"] != store.EngineVersion {
			t.Errorf("the embedded engine reports ferretdbVersion %v, want %s", info["ferretdbVersion"], store.EngineVersion)
		}
	}
	for _, tc := range []struct {
		info          bson.M
		ferret, error bool
	}{
		{bson.M{"version": "7.0.14"}, false, false}, // MongoDB
		{bson.M{"ferretdbVersion": store.EngineVersion}, true, false},
		{bson.M{"ferretdbVersion": "v1.24.2"}, true, true},
		{bson.M{"ferretdbVersion": "v1.24.2+msgapi"}, true, true}, // an earlier patch level: no msgapiWrite
		{bson.M{"ferretdbVersion": "unknown"}, true, true},
		{bson.M{"ferretdbVersion": "v2.1.0"}, true, true},
	} {
		ferret, err := store.EngineCheck(tc.info)
		if ferret != tc.ferret || (err != nil) != tc.error {
			t.Errorf("%v: ferret %v, error %v; want %v, error %v", tc.info, ferret, err, tc.ferret, tc.error)
		}
	}
}
