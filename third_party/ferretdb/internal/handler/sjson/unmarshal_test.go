// Copyright 2021 FerretDB Inc.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package sjson

// msgapi (PATCHES.md, patch 17): Unmarshal's one-pass reader must give
// exactly what the two-pass decoder (unmarshalSlow) gives, for every text:
// the same document, or an error where it errs. Every test below compares
// the two.

import (
	"bytes"

	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// outcome is what a decoder did with one text.
type outcome struct {
	doc      *types.Document
	err      error
	panicked any
}

func decodeWith(f func([]byte) (*types.Document, error), data []byte) (o outcome) {
	defer func() { o.panicked = recover() }()
	o.doc, o.err = f(data)
	return o
}

// checkDecodeSame fails unless Unmarshal and unmarshalSlow agree on data;
// it reports whether the one-pass reader decoded it.
func checkDecodeSame(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	_, fast = unmarshalFast(data)
	got, want := decodeWith(Unmarshal, data), decodeWith(unmarshalSlow, data)
	switch {
	case (got.panicked != nil) != (want.panicked != nil):
		t.Fatalf("%s\npanic: patched %v, upstream %v", data, got.panicked, want.panicked)
	case got.panicked != nil:
	case (got.err != nil) != (want.err != nil):
		t.Fatalf("%s\nerror: patched %v, upstream %v (fast: %v)", data, got.err, want.err, fast)
	case got.err != nil:
	case !sameValue(got.doc, want.doc) || !reflect.DeepEqual(got.doc, want.doc):
		t.Fatalf("%s\ndecoded differently (fast: %v):\n got %#v\nwant %#v", data, fast, got.doc, want.doc)
	}
	return fast
}

// sameValue compares two decoded values, their Go types included.
func sameValue(a, b any) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	switch a := a.(type) {
	case *types.Document:
		b := b.(*types.Document)
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			ka, va := a.FieldAt(i)
			kb, vb := b.FieldAt(i)
			if ka != kb || !sameValue(va, vb) {
				return false
			}
		}
		return true
	case *types.Array:
		b := b.(*types.Array)
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			va, _ := a.Get(i)
			vb, _ := b.Get(i)
			if !sameValue(va, vb) {
				return false
			}
		}
		return true
	case float64:
		return math.Float64bits(a) == math.Float64bits(b.(float64))
	case time.Time:
		b := b.(time.Time)
		return a.Equal(b) && a.Location() == b.Location()
	case types.Binary:
		b := b.(types.Binary)
		return a.Subtype == b.Subtype && bytes.Equal(a.B, b.B) && (a.B == nil) == (b.B == nil)
	}
	return a == b
}

func TestUnmarshalEveryType(t *testing.T) {
	oid := types.ObjectID{0x62, 0x0e, 0x9a, 0xff, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07}
	nested := mustDoc(t, "a", int32(1), "b", "x", "arr", mustArray(t, int64(2), "s", mustDoc(t)), "n", types.Null)
	d := mustDoc(t,
		"_id", oid,
		"double", 1.25, "negZero", math.Copysign(0, -1), "big", 1e21, "small", 1e-7,
		"string", "hello <world> & \"friends\"\n", "unicode", "caf\u00e9 \U0001F600",
		"empty", "",
		"binary", types.Binary{B: []byte{0, 1, 2, 255}, Subtype: types.BinaryUser},
		"binaryEmpty", types.Binary{B: []byte{}, Subtype: types.BinaryGeneric},
		"true", true, "false", false,
		"date", time.Date(2026, 12, 6, 15, 4, 5, 123e6, time.UTC),
		"null", types.Null,
		"regex", types.Regex{Pattern: `^a\d+"<`, Options: "imsx"},
		"int", int32(math.MinInt32), "long", int64(math.MaxInt64),
		"timestamp", types.Timestamp(math.MaxUint64),
		"doc", nested, "emptyDoc", mustDoc(t),
		"array", mustArray(t, 1.5, "two", nested, mustArray(t), mustArray(t, mustArray(t, int32(3))), types.Null, true, oid),
		"emptyArray", mustArray(t),
	)
	for _, doc := range []*types.Document{d, mustDoc(t), mustDoc(t, "_id", "only")} {
		data := must.NotFail(Marshal(doc))
		if !checkDecodeSame(t, data) {
			t.Fatalf("the one-pass reader gave up on Marshal's own output: %s", data)
		}
		got := must.NotFail(Unmarshal(data))
		if !bytes.Equal(must.NotFail(Marshal(got)), data) {
			t.Fatalf("read back and written again differs:\n%s\n%s", must.NotFail(Marshal(got)), data)
		}
	}
	// Invalid UTF-8 is stored as U+FFFD (so it reads back as that).
	if !checkDecodeSame(t, must.NotFail(Marshal(mustDoc(t, "_id", "a\xffb", "s", mustDoc(t, "x", "\xc3"))))) {
		t.Fatal("the one-pass reader gave up on Marshal's own output")
	}
}

// Texts the engine never writes, valid or not: each is decoded (or
// refused) exactly as before.
func TestUnmarshalOtherForms(t *testing.T) {
	sch := `{"p":{"_id":{"t":"string"},"a":{"t":"int"},"b":{"t":"object","$s":{"p":{"c":{"t":"string"}},"$k":["c"]}}},"$k":["_id","a","b"]}`
	for _, s := range []string{
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"}}`,       // Marshal's form
		` {"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"}}`,      // leading space
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"}} `,      // trailing space: refused
		`{"$s":` + sch + `, "_id":"x","a":1,"b":{"c":"y"}}`,      // inner space
		`{"$s":` + sch + `,"a":1,"_id":"x","b":{"c":"y"}}`,       // fields reordered
		`{"_id":"x","$s":` + sch + `,"a":1,"b":{"c":"y"}}`,       // schema not first
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"},"a":2}`, // duplicate field
		`{"$s":` + sch + `,"_id":"x","a":1}`,                     // missing field
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"},"z":3}`, // extra field
		`{"$s":` + sch + `,"\u005fid":"x","a":1,"b":{"c":"y"}}`,  // escaped key
		`{"$s":` + sch + `,"_id":"\u0078","a":1,"b":{"c":"y"}}`,  // escaped value
		`{"$s":` + sch + `,"_id":"x\/y","a":1,"b":{"\u0063":"y"}}`,
		`{"$s":` + sch + `,"_id":"x","a":1.0,"b":{"c":"y"}}`,        // int written as 1.0
		`{"$s":` + sch + `,"_id":"x","a":1e0,"b":{"c":"y"}}`,        // int written as 1e0
		`{"$s":` + sch + `,"_id":"x","a":2147483648,"b":{"c":"y"}}`, // int overflow
		`{"$s":` + sch + `,"_id":"x","a":-0,"b":{"c":"y"}}`,
		`{"$s":` + sch + `,"_id":"x","a":01,"b":{"c":"y"}}`,            // not JSON
		`{"$s":` + sch + `,"_id":"x","a":"1","b":{"c":"y"}}`,           // int as a string
		`{"$s":` + sch + `,"_id":null,"a":null,"b":null}`,              // nulls
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{}}`,                    // empty nested document
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y","d":1}}`,       // extra nested field
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"}`,              // truncated
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y"}}}`,            // one brace too many
		`{"$s":` + sch + `,"_id":"x","a":1,"b":{"c":"y\u00"}}`,         // bad escape
		`{"$s":` + sch + `,"_id":"x` + "\n" + `","a":1,"b":{"c":"y"}}`, // raw control character
		`{"$s":{"p":{},"$k":[]}}`,
		`{"$s":{}}`,
		`{"$s":{"p":{"a":{"t":"int"}},"$k":["a","a"]},"a":1,"a":1}`, // duplicate key in the schema
		`{"$s":{"p":{"$s":{"t":"int"}},"$k":["$s"]},"$s":1}`,
		`{"$s":{"p":{"a":{"t":"weird"}},"$k":["a"]},"a":1}`,
		`{"$s":{"p":{"a":{"t":"null"}},"$k":["a"]},"a":1}`,
		`{"$s":{"p":{"a":{"t":"object"}},"$k":["a"]},"a":{}}`, // object without a schema
		`{"$s":{"p":{"a":{"t":"array"}},"$k":["a"]},"a":[]}`,  // array without items
		`{"$s":{"p":{"a":{"t":"array","i":[]}},"$k":["a"]},"a":[]}`,
		`{"$s":{"p":{"a":{"t":"array","i":[{"t":"int"}]}},"$k":["a"]},"a":[]}`,
		`{"$s":{"p":{"a":{"t":"array","i":[{"t":"int"}]}},"$k":["a"]},"a":[1,2]}`,
		`{"$s":{"p":{"a":{"t":"objectId"}},"$k":["a"]},"a":"620E9AFF0001020304050607"}`,
		`{"$s":{"p":{"a":{"t":"objectId"}},"$k":["a"]},"a":"620e9aff00010203040506"}`,
		`{"$s":{"p":{"a":{"t":"timestamp"}},"$k":["a"]},"a":-1}`,
		`{"$s":{"p":{"a":{"t":"double"}},"$k":["a"]},"a":1e400}`,
		`{"$s":{"p":{"a":{"t":"double"}},"$k":["a"]},"a":true}`,
		`{"$s":{"p":{"a":{"t":"bool"}},"$k":["a"]},"a":1}`,
		`{"$s":{"p":{"a":{"t":"date"}},"$k":["a"]},"a":-62135596800000}`,
		`{"$s":{"p":{"a":{"t":"binData","s":0}},"$k":["a"]},"a":"!!"}`,
		`{"$s":{"p":{"a":{"t":"regex"}},"$k":["a"]},"a":"x"}`,
		`{"$s":{"p":{"a":{"t":"string"}},"$k":["a"],"x":1},"a":"x"}`, // unknown schema field
		`{"$s":{"p":{"a b":{"t":"string"}},"$k":["a b"]},"a b":"x"}`,
		`{"$s":{"p":{"\u00e9":{"t":"string"}},"$k":["\u00e9"]},"é":"x"}`,
		`[]`, `null`, ``, `{`, `{"$s":`, `{"$s":{}`, `{"$s":{}}x`,
		`{"$s":{"p":{"a":{"t":"object","$s":{"p":{"b":{"t":"object","$s":{}}},"$k":["b"]}}},"$k":["a"]},"a":{"b":{}}}`,
		`{"$s":{"p":{"a":{"t":"object","$s":{"p":{"x":{"t":"int"},"x":{"t":"int"}},"$k":["x","x"]}}},"$k":["a"]},"a":{"x":1,"x":1}}`,
		`{"$s":{"p":{"a":{"t":"object","$s":{"p":{"<":{"t":"int"}},"$k":["<"]}}},"$k":["a"]},"a":{"\u003c":1}}`,
	} {
		checkDecodeSame(t, []byte(s))
	}
	deep := `{"$s":{"p":{"a":` + strings.Repeat(`{"t":"array","i":[`, 150) + `{"t":"int"}` + strings.Repeat(`]}`, 150) +
		`},"$k":["a"]},"a":` + strings.Repeat("[", 150) + "1" + strings.Repeat("]", 150) + `}`
	checkDecodeSame(t, []byte(deep))
}

// Random documents: decoded in one pass, as before.
func TestUnmarshalRandomDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fast := 0
	const n = 3000
	for range n {
		if checkDecodeSame(t, must.NotFail(Marshal(randomDoc(t, r, 0)))) {
			fast++
		}
	}
	// Keys that Marshal quotes as they are are most of randomDoc's; the
	// others take the other way.
	if fast < n/4 {
		t.Fatalf("only %d of %d documents were read in one pass", fast, n)
	}
	t.Logf("%d of %d documents read in one pass", fast, n)
}

// Damaged copies of random documents: a byte deleted, inserted, replaced,
// two swapped, a piece repeated.
func TestUnmarshalDamaged(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const alphabet = " \t\"\\,:{}[]0123456789-+.eEtrufalsn/xu\x00\x1f\xff"
	for range 400 {
		data := must.NotFail(Marshal(randomDoc(t, r, 0)))
		for range 25 {
			m := bytes.Clone(data)
			i := r.IntN(len(m))
			switch r.IntN(5) {
			case 0:
				m = append(m[:i], m[i+1:]...)
			case 1:
				m = append(m[:i], append([]byte{alphabet[r.IntN(len(alphabet))]}, m[i:]...)...)
			case 2:
				m[i] = alphabet[r.IntN(len(alphabet))]
			case 3:
				if i+1 < len(m) {
					m[i], m[i+1] = m[i+1], m[i]
				}
			case 4:
				j := min(len(m), i+1+r.IntN(12))
				m = append(m[:j], append(bytes.Clone(m[i:j]), m[j:]...)...)
			}
			checkDecodeSame(t, m)
		}
	}
}

// FuzzUnmarshal compares Unmarshal with unmarshalSlow on any text (go test
// runs the seeds; go test -fuzz FuzzUnmarshal searches further).
func FuzzUnmarshal(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		f.Add(must.NotFail(Marshal(randomDoc(f, r, 0))))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeSame(t, data)
	})
}

func BenchmarkUnmarshalEvent(b *testing.B) {
	data := must.NotFail(Marshal(benchDoc(b)))
	if _, ok := unmarshalFast(data); !ok {
		b.Fatal("not read in one pass")
	}
	for _, c := range []struct {
		name string
		f    func([]byte) (*types.Document, error)
	}{{"upstream", unmarshalSlow}, {"patched", Unmarshal}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = must.NotFail(c.f(data))
			}
		})
	}
}
