package store_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// The embedded engine keeps each document's schema (its fields' names,
// order and types) beside its values, and decodes a schema once per shape,
// sharing it between the documents of that shape (third_party/ferretdb/
// PATCHES.md, patch 14). Documents of one shape read back as stored, in any
// order and repeatedly; a stored schema that does not decode is refused at
// every read, not remembered as if it had; and a shape read before or after
// it is unaffected.
func TestStoredSchemas(t *testing.T) {
	_, dir := storetest.URI(t)
	if dir == "" {
		t.Skip("stored schemas are the embedded engine's; MSGAPI_TEST_MONGODB_URI is set")
	}
	s := storetest.New(t, things)
	c, ctx := s.Collection("things"), context.Background()
	docs := []bson.D{
		{{Key: "_id", Value: "a"}, {Key: "n", Value: int32(1)}, {Key: "s", Value: "one"}, {Key: "sub", Value: bson.D{{Key: "k", Value: true}}}},
		{{Key: "_id", Value: "b"}, {Key: "n", Value: int32(2)}, {Key: "s", Value: "two"}, {Key: "sub", Value: bson.D{{Key: "k", Value: false}}}},
		{{Key: "_id", Value: "c"}, {Key: "n", Value: int32(3)}, {Key: "s", Value: "three"}, {Key: "sub", Value: bson.D{{Key: "k", Value: true}}}},
		// Another shape: n a string, the fields in another order.
		{{Key: "_id", Value: "d"}, {Key: "s", Value: "four"}, {Key: "n", Value: "4"}, {Key: "sub", Value: bson.D{{Key: "k", Value: true}}}},
	}
	for _, d := range docs {
		if _, err := c.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	read := func(id string) (bson.D, error) {
		var got bson.D
		err := c.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&got)
		return got, err
	}
	check := func(i int) {
		t.Helper()
		got, err := read(docs[i][0].Value.(string))
		if err != nil {
			t.Fatalf("read %v: %v", docs[i][0].Value, err)
		}
		if want, have := bsonText(t, docs[i]), bsonText(t, got); want != have {
			t.Errorf("read back\n%s\nwant\n%s", have, want)
		}
	}
	for _, i := range []int{0, 1, 2, 3, 0, 2, 1, 3} {
		check(i)
	}

	// c's schema damaged: a field no schema has. The engine refuses the
	// document, at the second read too.
	bad := `{"$s":{"p":{"_id":{"t":"string"},"n":{"t":"int"},"s":{"t":"string"},"sub":{"t":"object","$s":{"p":{"k":{"t":"bool"}},"$k":["k"]}}},"$k":["_id","n","s","sub"],"extra":1},` +
		`"_id":"c","n":3,"s":"three","sub":{"k":true}}`
	if err := store.RewriteStored(ctx, s, "things", "c", bad); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, err := read("c"); err == nil {
			t.Fatalf("a document whose schema does not decode was read: %v", got)
		}
	}
	// The undamaged documents of its shape and of the other still read.
	for _, i := range []int{0, 1, 3} {
		check(i)
	}
}

// bsonText is d as extended JSON, for comparing documents with their types.
func bsonText(t *testing.T, d bson.D) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(d, true, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
