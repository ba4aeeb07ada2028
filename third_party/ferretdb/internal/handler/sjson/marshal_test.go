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

// msgapi (PATCHES.md, patch 16): the appending encoder must write exactly
// upstream's bytes. upstreamMarshal below is upstream's Marshal as it was,
// over upstream's own encoders (marshalSchemaForDoc and the types'
// MarshalJSON, kept unchanged), and every test compares the two byte for
// byte.

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// upstreamMarshal is FerretDB v1.24.2's Marshal.
func upstreamMarshal(d *types.Document) ([]byte, error) {
	schema, err := marshalSchemaForDoc(d)
	if err != nil {
		return nil, err
	}

	var buf bytes.Buffer

	buf.WriteString(`{"$s":`)
	buf.Write(schema)

	keys := d.Keys()
	values := d.Values()

	for i, key := range keys {
		buf.WriteByte(',')
		buf.WriteString(`"`)
		buf.WriteString(key)
		buf.WriteString(`":`)

		b, err := toSJSON(values[i]).MarshalJSON()
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		buf.Write(b)
	}

	buf.WriteByte('}')

	return buf.Bytes(), nil
}

// trickyStrings are strings each of whose bytes encoding/json treats in
// its own way.
var trickyStrings = []string{
	"", "a", "plain text 123", `"quoted"`, `back\slash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "caf\u00e9 \u65e5\u672c \U0001F600", "\u2028line\u2029para",
	"bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate half", "\xf4\x90\x80\x80 above U+10FFFF",
	`{"id":"evt_1","data":{"body":"Hi <b>\"you\"</b> & \\ more\n"}}`,
	strings.Repeat("x\"<", 300),
}

var trickyFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e21, -1e21,
	123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, -math.MaxFloat64,
	1e-9, 2.5e-300, float64(1 << 53), float64(1<<53) + 2, 3.0000000000000004,
}

func mustDoc(t testing.TB, pairs ...any) *types.Document {
	t.Helper()
	d, err := types.NewDocument(pairs...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustArray(t testing.TB, values ...any) *types.Array {
	t.Helper()
	a, err := types.NewArray(values...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkSame fails unless Marshal and upstreamMarshal agree on d: the same
// bytes, or both an error.
func checkSame(t *testing.T, d *types.Document) {
	t.Helper()
	want, wantErr := upstreamMarshal(d)
	got, err := Marshal(d)
	switch {
	case wantErr != nil && err != nil:
		return
	case wantErr != nil || err != nil:
		t.Fatalf("upstream error %v, patched error %v", wantErr, err)
	case !bytes.Equal(got, want):
		t.Fatalf("patched encoding differs:\n got %s\nwant %s", got, want)
	}
	// AppendMarshal appends: what is in dst stays, the encoding follows.
	prefix := []byte("prefix")
	app, err := AppendMarshal(prefix, d)
	if err != nil || !bytes.Equal(app, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendMarshal after a prefix: %s (%v)", app, err)
	}
}

func TestMarshalEveryType(t *testing.T) {
	oid := types.ObjectID{0x62, 0x0e, 0x9a, 0xff, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07}
	nested := mustDoc(t, "a", int32(1), "b <&>", "x", "\"q\"", mustArray(t, int64(2), "s", mustDoc(t)), "\u2028", types.Null)
	d := mustDoc(t,
		"_id", oid,
		"double", 1.25, "negZero", math.Copysign(0, -1), "big", 1e21, "small", 1e-7,
		"string", "hello <world> & \"friends\"",
		"empty", "",
		"binary", types.Binary{B: []byte{0, 1, 2, 255}, Subtype: types.BinaryUser},
		"binaryEmpty", types.Binary{B: []byte{}, Subtype: types.BinaryGeneric},
		"binaryNil", types.Binary{Subtype: types.BinaryUUID},
		"true", true, "false", false,
		"date", time.Date(2026, 12, 6, 15, 4, 5, 123456789, time.UTC),
		"dateBefore1970", time.Date(1901, 1, 1, 0, 0, 0, 0, time.UTC),
		"null", types.Null,
		"regex", types.Regex{Pattern: `^a\d+"<`, Options: "imsx"},
		"int", int32(math.MinInt32), "intMax", int32(math.MaxInt32),
		"timestamp", types.Timestamp(math.MaxUint64),
		"long", int64(math.MinInt64), "longMax", int64(math.MaxInt64),
		"doc", nested,
		"emptyDoc", mustDoc(t),
		"array", mustArray(t, 1.5, "two", nested, mustArray(t), mustArray(t, mustArray(t, int32(3))), types.Null, true, oid),
		"emptyArray", mustArray(t),
	)
	checkSame(t, d)
	checkSame(t, mustDoc(t))
}

func TestMarshalStrings(t *testing.T) {
	for _, s := range trickyStrings {
		checkSame(t, mustDoc(t, "v", s, "nested", mustDoc(t, s, s), "arr", mustArray(t, s), "re", types.Regex{Pattern: s, Options: s}))
		if got, want := appendString(nil, s), must.NotFail(json.Marshal(s)); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, json.Marshal gives %s", s, got, want)
		}
	}
	// Every single byte, and every pair of a lead byte with a
	// continuation byte.
	for b := range 256 {
		s := string([]byte{byte(b)})
		checkSame(t, mustDoc(t, "v", s, "nested", mustDoc(t, s, int32(1))))
		for c := 0x80; c < 0xc0; c += 0x11 {
			checkSame(t, mustDoc(t, "v", string([]byte{byte(b), byte(c), 'z'})))
		}
	}
}

func TestMarshalNumbers(t *testing.T) {
	for _, f := range trickyFloats {
		checkSame(t, mustDoc(t, "f", f, "neg", -f, "arr", mustArray(t, f)))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		checkSame(t, mustDoc(t, "f", f))
	}
	for _, i := range []int64{0, 1, -1, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, 1 << 53} {
		checkSame(t, mustDoc(t, "l", i, "t", types.Timestamp(uint64(i)), "d", time.UnixMilli(i/1000)))
	}
}

// NaN and ±Inf are refused, at any depth, by upstream and by the patch.
func TestMarshalRefusesNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, d := range []*types.Document{
			mustDoc(t, "f", f),
			mustDoc(t, "d", mustDoc(t, "f", f)),
			mustDoc(t, "a", mustArray(t, int32(1), f)),
		} {
			if _, err := upstreamMarshal(d); err == nil {
				t.Fatalf("upstream encoded %v", f)
			}
			if b, err := Marshal(d); err == nil {
				t.Fatalf("patched encoder encoded %v: %s", f, b)
			}
		}
	}
}

// Random documents of every type, nested up to four levels.
func TestMarshalRandomDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		checkSame(t, randomDoc(t, r, 0))
	}
}

func randomDoc(t testing.TB, r *rand.Rand, depth int) *types.Document {
	d := types.MakeDocument(0)
	n := r.IntN(8)
	if depth == 0 {
		d.Set("_id", randomString(r))
	}
	for i := range n {
		d.Set(randomKey(r, i), randomValue(t, r, depth))
	}
	return d
}

func randomValue(t testing.TB, r *rand.Rand, depth int) any {
	k := r.IntN(15)
	if depth >= 4 && k < 2 {
		k = 2
	}
	switch k {
	case 0:
		return randomDoc(t, r, depth+1)
	case 1:
		a := types.MakeArray(0)
		for range r.IntN(5) {
			a.Append(randomValue(t, r, depth+1))
		}
		return a
	case 2:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
	case 3:
		return randomString(r)
	case 4:
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return types.Binary{B: b, Subtype: types.BinarySubtype(r.UintN(256))}
	case 5:
		var o types.ObjectID
		for i := range o {
			o[i] = byte(r.UintN(256))
		}
		return o
	case 6:
		return r.IntN(2) == 0
	case 7:
		return time.UnixMilli(r.Int64N(1<<45) - 1<<44).UTC()
	case 8:
		return types.Null
	case 9:
		return types.Regex{Pattern: randomString(r), Options: "ims"[:r.IntN(4)]}
	case 10:
		return int32(r.Uint32())
	case 11:
		return types.Timestamp(r.Uint64())
	case 12:
		return int64(r.Uint64())
	default:
		return trickyStrings[r.IntN(len(trickyStrings))]
	}
}

func randomKey(r *rand.Rand, i int) string {
	if r.IntN(4) == 0 {
		return randomString(r) + string(rune('a'+i))
	}
	return []string{"a", "status", "createdAt", "payload", "x_y", "n"}[r.IntN(6)] + string(rune('a'+i))
}

func randomString(r *rand.Rand) string {
	const alphabet = "abcXYZ019 _-\"\\<>&\n\t\x00\x1f\u00e9\u2028\U0001F600\xff"
	var b strings.Builder
	chars := []rune(alphabet)
	for range r.IntN(30) {
		if r.IntN(20) == 0 {
			b.WriteByte(0xff) // invalid UTF-8
			continue
		}
		b.WriteRune(chars[r.IntN(len(chars))])
	}
	return b.String()
}

// FuzzMarshalString compares appendString with json.Marshal (go test runs
// the seeds; go test -fuzz FuzzMarshalString searches further).
func FuzzMarshalString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendString(nil, s), must.NotFail(json.Marshal(s)); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, json.Marshal gives %s", s, got, want)
		}
	})
}

// FuzzMarshalFloat compares appendFloat with json.Marshal.
func FuzzMarshalFloat(f *testing.F) {
	for _, v := range trickyFloats {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		want, wantErr := json.Marshal(v)
		got, err := appendFloat(nil, v)
		if (wantErr != nil) != (err != nil) || !bytes.Equal(got, want) {
			t.Fatalf("appendFloat(%v) = %s, %v; json.Marshal gives %s, %v", v, got, err, want, wantErr)
		}
	})
}

// An event as msgapi stores it: its payload a JSON text of about 900
// bytes inside a string.
func benchDoc(b *testing.B) *types.Document {
	payload := `{"createdAt":"2026-12-06T15:15:20.041Z","data":{"message":{"id":"msg_s4xxh622vf2z6gem44toqhlt4y",` +
		`"workspaceId":"ws_466pxgfm7x3dro7ikemnwe7nta","leadId":"lead_8da33577c169d45748e48357e4bbb899",` +
		`"conversationId":"conv_8da33577c169d45748e48357e4bbb899","channel":"sms","direction":"outbound",` +
		`"recipientPhone":"+15550100000","recipientEmail":null,"body":"Your appointment is at 3pm","subject":null,` +
		`"attachments":[],"metadata":null,"status":"sent","provider":"log","providerMessageId":"log-msg_s4xxh622vf2z6gem44toqhlt4y",` +
		`"error":null,"errorCode":null,"statusAt":null,"dedupLockId":"b59a7ba361f264e657ab23a8f20a6c7657dd418330a838335cdc1eb8102073ff",` +
		`"sendAt":null,"cancellationKey":null,"test":false,"createdAt":"2026-12-06T15:15:20.039Z","updatedAt":"2026-12-06T15:15:20.041Z"}},` +
		`"id":"evt_c00524d657e88c9d619bc59a1a14c85b","type":"message.sent","workspaceId":"ws_466pxgfm7x3dro7ikemnwe7nta"}`
	at := time.Date(2026, 12, 6, 15, 15, 20, 41e6, time.UTC)
	return mustDoc(b, "_id", "evt_c00524d657e88c9d619bc59a1a14c85b", "workspaceId", "ws_466pxgfm7x3dro7ikemnwe7nta",
		"type", "message.sent", "subjectId", "msg_s4xxh622vf2z6gem44toqhlt4y", "createdAt", at, "payload", payload,
		"owner", "proc_4c2b7mcpwqyr3ku6xzr6yv7jvq", "scheduled", false, "expiresAt", at.Add(72*time.Hour))
}

func BenchmarkMarshalEvent(b *testing.B) {
	d := benchDoc(b)
	b.Run("upstream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = must.NotFail(upstreamMarshal(d))
		}
	})
	b.Run("patched", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = must.NotFail(Marshal(d))
		}
	})
}
