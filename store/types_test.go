package store_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store/storetest"
)

// Every BSON type the store keeps comes back as it went in, at the top
// level, in a nested document and in an array, through a read by _id and
// through a filtered read. On the embedded engine each value is stored as
// JSON and decoded field by field on every read (third_party/ferretdb/
// PATCHES.md, patch 10 changed how); this is the check that the decoding
// loses nothing, on either engine.
func TestEveryTypeRoundTrips(t *testing.T) {
	s := storetest.New(t, things)
	c, ctx := s.Collection("things"), context.Background()

	oid := bson.NewObjectID()
	at := bson.NewDateTimeFromTime(time.Date(2026, 12, 6, 9, 30, 15, 123_000_000, time.UTC))
	values := bson.D{
		{Key: "double", Value: 3.25},
		{Key: "doubleNegZero", Value: math.Copysign(0, -1)},
		{Key: "doubleWhole", Value: 42.0},
		{Key: "string", Value: "Reply STOP to opt out — “quotes”, \"escapes\" \\ \t\n and 😀"},
		{Key: "emptyString", Value: ""},
		{Key: "binary", Value: bson.Binary{Subtype: 0x00, Data: []byte{0, 1, 2, 0xfe, 0xff}}},
		{Key: "binaryUUID", Value: bson.Binary{Subtype: 0x04, Data: []byte("0123456789abcdef")}},
		{Key: "objectId", Value: oid},
		{Key: "true", Value: true},
		{Key: "false", Value: false},
		{Key: "dateTime", Value: at},
		{Key: "null", Value: nil},
		{Key: "regex", Value: bson.Regex{Pattern: `^\+1\d{10}$`, Options: "i"}},
		{Key: "int32", Value: int32(-7)},
		{Key: "timestamp", Value: bson.Timestamp{T: 1_796_000_000, I: 3}},
		{Key: "int64", Value: int64(1) << 53},
		{Key: "emptyArray", Value: bson.A{}},
		{Key: "emptyDocument", Value: bson.D{}},
	}
	nested := append(bson.D{}, values...)
	var array bson.A
	for _, e := range values {
		if _, isArray := e.Value.(bson.A); !isArray { // the engine stores no arrays in arrays
			array = append(array, e.Value)
		}
	}
	doc := append(bson.D{{Key: "_id", Value: "every-type"}}, values...)
	doc = append(doc, bson.E{Key: "nested", Value: bson.D{{Key: "deeper", Value: nested}}}, bson.E{Key: "array", Value: array})
	if _, err := c.InsertOne(ctx, doc); err != nil {
		t.Fatal(err)
	}

	for _, filter := range []bson.D{
		{{Key: "_id", Value: "every-type"}},
		{{Key: "int32", Value: int32(-7)}, {Key: "string", Value: values[3].Value}},
	} {
		var got bson.D
		if err := c.FindOne(ctx, filter).Decode(&got); err != nil {
			t.Fatalf("find %v: %v", filter, err)
		}
		if diff := cmp.Diff(doc, got); diff != "" {
			t.Errorf("find %v: the document came back changed (-stored +read):\n%s", filter, diff)
		}
	}
}
