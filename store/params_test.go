package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi/store/storetest"
)

// The embedded engine reads a command's parameters by the tags of a struct
// per command (third_party/ferretdb/PATCHES.md, patch 11 parses them once
// per struct): an unknown parameter, an unimplemented one, a non-default
// value of one implemented only at its default, a bad number and a missing
// required parameter are each refused with the engine's own error, and
// valid parameters are applied.
func TestEngineCommandParameters(t *testing.T) {
	if _, dir := storetest.URI(t); dir == "" {
		t.Log("not the embedded engine: MongoDB reads its own parameters")
		return
	}
	s := storetest.New(t, things)
	c, ctx := s.Collection("things"), context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "n", Value: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	db := c.Database()
	for _, tc := range []struct {
		name string
		cmd  bson.D
		code int32  // 0: accepted
		msg  string // in the error's message
	}{
		{"unknown parameter", bson.D{{Key: "find", Value: "things"}, {Key: "bogus", Value: 1}}, 9, `unknown field "bogus"`},
		{"unimplemented parameter", bson.D{{Key: "find", Value: "things"}, {Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}}}}, 238, `"collation"`},
		{"non-default value", bson.D{{Key: "find", Value: "things"}, {Key: "returnKey", Value: true}}, 238, `"returnKey"`},
		{"negative number", bson.D{{Key: "find", Value: "things"}, {Key: "limit", Value: -1}}, 51024, "limit"},
		{"missing required parameter", bson.D{{Key: "distinct", Value: "things"}}, 40414, "BSON field 'distinct.key' is missing but a required field"},
		{"empty collection name", bson.D{{Key: "find", Value: ""}}, 73, "Invalid namespace specified"},
		{"valid parameters", bson.D{{Key: "find", Value: "things"}, {Key: "filter", Value: bson.D{{Key: "n", Value: 1}}},
			{Key: "sort", Value: bson.D{{Key: "_id", Value: -1}}}, {Key: "limit", Value: 2}, {Key: "returnKey", Value: false}, {Key: "allowDiskUse", Value: true}}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res struct {
				Cursor struct {
					FirstBatch []bson.M `bson:"firstBatch"`
				} `bson:"cursor"`
			}
			err := db.RunCommand(ctx, tc.cmd).Decode(&res)
			if tc.code == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got := len(res.Cursor.FirstBatch); got != 2 || res.Cursor.FirstBatch[0]["_id"] != "c" {
					t.Errorf("first batch %v: want c and b (sorted by _id descending, limit 2)", res.Cursor.FirstBatch)
				}
				return
			}
			var ce mongo.CommandError
			if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(ce.Message, tc.msg) {
				t.Errorf("error %v: want code %d with %q", err, tc.code, tc.msg)
			}
		})
	}
}
