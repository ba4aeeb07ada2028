package idempotency_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/idempotency"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abc", true},
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"  padded\t", "padded", true},                      // OWS is not part of a field value
		{"inner space ok", "inner space ok", true},          // 0x20 is printable
		{`"sf-string"`, "sf-string", true},                  // IETF draft form
		{`"a \"quoted\" \\ key"`, `a "quoted" \ key`, true}, // sf-string escapes
		{`" spaced "`, " spaced ", true},                    // spaces inside quotes are the key's
		{"~!#$%&'()*+,-./:;<=>?@[]^_`{|}", "~!#$%&'()*+,-./:;<=>?@[]^_`{|}", true},
		{`"`, `"`, true}, // a lone quote is a one-character key
		{strings.Repeat("k", 255), strings.Repeat("k", 255), true},

		{"", "", false},
		{"   ", "", false},
		{`""`, "", false},
		{strings.Repeat("k", 256), "", false},
		{`"` + strings.Repeat("k", 256) + `"`, "", false},
		{"ключ", "", false},
		{"caf\u00e9", "", false},
		{"a\tb", "", false},
		{"a\x00b", "", false},
		{"a\nb", "", false},
		{"a\x7fb", "", false},
		{`"bad \n escape"`, "", false},
		{`"unescaped " quote"`, "", false},
		{`"trailing backslash\"`, "", false},
	}
	for _, tt := range tests {
		got, err := idempotency.ParseKey(tt.in)
		if !tt.ok {
			var e *msgapi.Error
			if !errors.As(err, &e) || e.Code != msgapi.CodeInvalid || len(e.Fields) != 1 || e.Fields[0].Field != "Idempotency-Key" {
				t.Errorf("ParseKey(%q) = %q, %v; want a CodeInvalid *msgapi.Error on field Idempotency-Key", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	const base = `{"channel":"sms","recipientPhone":"+15550100000","body":"héllo <b>","n":1.50,"metadata":{"b":[1,{"y":2,"x":1}],"a":null}}`
	same := []string{
		`{"metadata":{"a":null,"b":[1,{"x":1,"y":2}]},"n":1.50,"body":"héllo <b>","recipientPhone":"+15550100000","channel":"sms"}`,
		"{\n  \"channel\" : \"sms\",\r\n\t\"recipientPhone\":\"+15550100000\", \"body\":\"h\\u00e9llo \\u003cb>\",\"n\":1.50,\n\"metadata\":{ \"b\":[ 1 , { \"y\":2,\"x\":1 } ],\"a\":null }}\n",
		`{"channel":"sms","channel":"sms","recipientPhone":"+15550100000","body":"héllo <b>","n":1.50,"metadata":{"b":[1,{"y":2,"x":1}],"a":null}}`,
	}
	different := []string{
		`{"channel":"sms","recipientPhone":"+15550100000","body":"héllo <b> ","n":1.50,"metadata":{"b":[1,{"y":2,"x":1}],"a":null}}`, // one character of body
		`{"channel":"sms","recipientPhone":"+15550100000","body":"héllo <b>","n":1.5,"metadata":{"b":[1,{"y":2,"x":1}],"a":null}}`,   // number as written
		`{"channel":"sms","recipientPhone":"+15550100000","body":"héllo <b>","n":1.50,"metadata":{"b":[{"y":2,"x":1},1],"a":null}}`,  // array order
		`{"channel":"sms","recipientPhone":"+15550100000","body":"héllo <b>","n":1.50,"metadata":{"b":[1,{"y":2,"x":1}]}}`,           // null is not absent
		base + `{}`, // trailing data: raw bytes
		base[:len(base)-1],
	}
	want := idempotency.Fingerprint("POST", "/api/messages", []byte(base))
	if len(want) != 64 {
		t.Fatalf("fingerprint %q is not hex SHA-256", want)
	}
	for _, b := range same {
		if got := idempotency.Fingerprint("POST", "/api/messages", []byte(b)); got != want {
			t.Errorf("Fingerprint(%s) = %s, want %s (same request)", b, got, want)
		}
	}
	for _, b := range different {
		if got := idempotency.Fingerprint("POST", "/api/messages", []byte(b)); got == want {
			t.Errorf("Fingerprint(%s) equals the base request's", b)
		}
	}
	if idempotency.Fingerprint("PUT", "/api/messages", []byte(base)) == want || idempotency.Fingerprint("POST", "/api/other", []byte(base)) == want {
		t.Error("method or path does not change the fingerprint")
	}
	// Invalid bodies are hashed raw, so different bad bytes stay different
	// (encoding/json would have turned both into U+FFFD).
	if idempotency.Fingerprint("POST", "/p", []byte("{\"b\":\"\xff\"}")) == idempotency.Fingerprint("POST", "/p", []byte("{\"b\":\"\xfe\"}")) {
		t.Error("two bodies with different invalid UTF-8 share a fingerprint")
	}
	// Framing: moving bytes between method and path changes the hash.
	if idempotency.Fingerprint("POS", "T/p", nil) == idempotency.Fingerprint("POST", "/p", nil) {
		t.Error("fingerprint fields are not framed")
	}
}

func TestRecordIDScope(t *testing.T) {
	base := idempotency.RecordID("ws_a", "POST", "/api/messages", "k1")
	others := map[string]string{
		"other workspace": idempotency.RecordID("ws_b", "POST", "/api/messages", "k1"),
		"other method":    idempotency.RecordID("ws_a", "PUT", "/api/messages", "k1"),
		"other path":      idempotency.RecordID("ws_a", "POST", "/api/leads", "k1"),
		"other key":       idempotency.RecordID("ws_a", "POST", "/api/messages", "k2"),
		"shifted bytes":   idempotency.RecordID("ws_aP", "OST", "/api/messages", "k1"),
	}
	for name, id := range others {
		if id == base {
			t.Errorf("%s: same record id %s", name, id)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", "", " a ", `"q"`, `"a\"b"`, "\x00", "ключ", strings.Repeat("x", 256), `"\`, `""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := idempotency.ParseKey(in)
		if err != nil {
			var e *msgapi.Error
			if !errors.As(err, &e) || e.Code != msgapi.CodeInvalid {
				t.Fatalf("ParseKey(%q) error %v is not CodeInvalid", in, err)
			}
			return
		}
		if len(got) < 1 || len(got) > 255 {
			t.Fatalf("ParseKey(%q) = %q: length %d out of 1..255", in, got, len(got))
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x is not printable ASCII", in, got, got[i])
			}
		}
		// A bare key that needs no trimming or unquoting is taken as is.
		quoted := len(in) >= 2 && in[0] == '"' && in[len(in)-1] == '"'
		if strings.Trim(in, " \t") == in && !quoted && in != got {
			t.Fatalf("ParseKey(%q) = %q, want the key unchanged", in, got)
		}
	})
}

// FuzzFingerprint: never panics, and re-serialising a JSON body with every
// object's keys in another order and other whitespace never changes it.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `{"z":{"y":{"x":1.0e3}}}`, `[]`, `"s"`, `{`, ``, `{"a":1}{"b":2}`, `{"<":"&\u2028"}`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fp := idempotency.Fingerprint("POST", "/api/messages", body)
		if fp != idempotency.Fingerprint("POST", "/api/messages", body) {
			t.Fatal("fingerprint is not deterministic")
		}
		if !utf8.Valid(body) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return
		}
		if _, err := dec.Token(); err != io.EOF {
			return
		}
		var b bytes.Buffer
		writeShuffled(&b, v, 0)
		if got := idempotency.Fingerprint("POST", "/api/messages", b.Bytes()); got != fp {
			t.Fatalf("reordered body changed the fingerprint\n original: %s\nreordered: %s", body, b.Bytes())
		}
	})
}

// writeShuffled writes v as JSON with object keys in reverse order, odd
// whitespace, and strings escaped differently from encoding/json's default.
func writeShuffled(b *bytes.Buffer, v any, depth int) {
	ws := []string{"", " ", "\n\t", "\r\n  "}[depth%4]
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		b.WriteString("{" + ws)
		for i, k := range keys {
			if i > 0 {
				b.WriteString(ws + "," + ws)
			}
			writeShuffled(b, k, depth+1)
			b.WriteString(ws + ":" + ws)
			writeShuffled(b, v[k], depth+1)
		}
		b.WriteString(ws + "}")
	case []any:
		b.WriteString("[" + ws)
		for i, e := range v {
			if i > 0 {
				b.WriteString("," + ws)
			}
			writeShuffled(b, e, depth+1)
		}
		b.WriteString("]")
	case string:
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(depth%2 == 0)
		_ = enc.Encode(v)
		b.Truncate(b.Len() - 1) // Encode's newline
	case json.Number:
		b.WriteString(v.String())
	default: // bool, nil
		out, _ := json.Marshal(v)
		b.Write(out)
	}
}

func TestWriteShuffledKeepsValue(t *testing.T) {
	in := `{"b":{"d":1,"c":"<x>"},"a":[1,"\u2028",null,true]}`
	var v, back any
	_ = json.Unmarshal([]byte(in), &v)
	var b bytes.Buffer
	writeShuffled(&b, v, 0)
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("writeShuffled wrote invalid JSON %s: %v", b.Bytes(), err)
	}
	if diff := cmp.Diff(v, back); diff != "" {
		t.Errorf("writeShuffled changed the value (-want +got):\n%s", diff)
	}
	if bytes.Equal(b.Bytes(), []byte(in)) {
		t.Error("writeShuffled did not reorder anything")
	}
}
