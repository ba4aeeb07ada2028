package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// oldGroupCommand is the GroupWriteCommand as writeGroup built it before
// groupCommand: a bson.D the driver encoded.
func oldGroupCommand(parts []*groupPart, replaces []*batchOp) bson.D {
	inserts := make(bson.A, len(parts))
	for k, p := range parts {
		docs := bson.A{}
		for _, d := range p.docs {
			docs = append(docs, d)
		}
		inserts[k] = bson.D{{Key: "collection", Value: p.name}, {Key: "documents", Value: docs}}
	}
	cmd := bson.D{{Key: GroupWriteCommand, Value: 1}, {Key: "inserts", Value: inserts}}
	if len(replaces) > 0 {
		var rs bson.A
		for _, op := range replaces {
			rs = append(rs, bson.D{{Key: "collection", Value: op.coll}, {Key: "filter", Value: op.filter}, {Key: "replacement", Value: op.docs[0]}})
		}
		cmd = append(cmd, bson.E{Key: "replaces", Value: rs})
	}
	return cmd
}

// The command built into one buffer has the bytes the driver gave the
// bson.D before: the engine reads the same command.
func TestGroupCommandBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	doc := func() bson.Raw {
		d := bson.D{{Key: "_id", Value: fmt.Sprintf("id_%d", r.Int())}}
		for i := range r.IntN(12) {
			switch r.IntN(4) {
			case 0:
				d = append(d, bson.E{Key: fmt.Sprintf("s%d", i), Value: string(make([]byte, r.IntN(300)))})
			case 1:
				d = append(d, bson.E{Key: fmt.Sprintf("n%d", i), Value: r.Int64()})
			case 2:
				d = append(d, bson.E{Key: fmt.Sprintf("d%d", i), Value: bson.D{{Key: "x", Value: r.Float64()}, {Key: "a", Value: bson.A{1, "two"}}}})
			default:
				d = append(d, bson.E{Key: fmt.Sprintf("b%d", i), Value: r.IntN(2) == 0})
			}
		}
		return bson.Raw(mustMarshal(t, d))
	}
	for round := range 500 {
		var parts []*groupPart
		for k := range r.IntN(6) {
			p := &groupPart{name: fmt.Sprintf("coll_%d_%s", k, string(make([]byte, r.IntN(3))))}
			for range 1 + r.IntN(30) {
				p.docs = append(p.docs, doc())
			}
			parts = append(parts, p)
		}
		var replaces []*batchOp
		for i := range r.IntN(4) {
			f := bson.Raw(mustMarshal(t, bson.D{{Key: "_id", Value: fmt.Sprint(i)}, {Key: "token", Value: r.Int()}}))
			replaces = append(replaces, &batchOp{coll: fmt.Sprintf("keys%d", i), filter: f, docs: []bson.Raw{doc()}})
		}
		want := mustMarshal(t, oldGroupCommand(parts, replaces))
		got := groupCommand(parts, replaces)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: the command differs:\n got %v\nwant %v", round, got, bson.Raw(want))
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
