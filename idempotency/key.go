package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/msgapi/msgapi"
)

// Header is the request header this package serves.
const Header = "Idempotency-Key"

// MaxKeyLen is the longest key accepted, in bytes (all of them ASCII).
const MaxKeyLen = 255

// ParseKey validates an Idempotency-Key header value and returns the key.
//
// A key is 1–255 printable ASCII characters (0x20–0x7E). Leading and
// trailing spaces and tabs are not part of an HTTP field value (RFC 9110
// §5.5), so they are trimmed, as net/http already does; spaces inside the
// key are kept. The IETF httpapi draft makes the header a Structured Field
// String ("…" with \" and \\ escapes) while Stripe-style clients send the
// bare key, so both are accepted and mean the same key: `"abc"` is `abc`.
// Anything else is a *msgapi.Error with CodeInvalid naming the header.
func ParseKey(h string) (string, error) {
	k := strings.Trim(h, " \t")
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		var ok bool
		if k, ok = unquote(k[1 : len(k)-1]); !ok {
			return "", invalidKey(`a quoted Idempotency-Key must be a structured-field string: printable ASCII, with only \" and \\ escaped`)
		}
	}
	switch {
	case k == "":
		return "", invalidKey("the Idempotency-Key header must not be empty")
	case len(k) > MaxKeyLen:
		return "", invalidKey("the Idempotency-Key header must be at most 255 characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return "", invalidKey("the Idempotency-Key header must be printable ASCII characters only")
		}
	}
	return k, nil
}

// unquote decodes the inside of an RFC 8941 sf-string.
func unquote(s string) (string, bool) {
	if !strings.ContainsAny(s, `"\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return "", false
		case '\\':
			if i+1 == len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", false
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func invalidKey(msg string) error {
	return &msgapi.Error{
		Code:    msgapi.CodeInvalid,
		Message: msg,
		Fields:  []msgapi.FieldError{{Field: Header, Message: msg}},
	}
}

// Fingerprint identifies a request for the "same key, different request"
// check: hex SHA-256 over the method, the path and the canonical JSON of the
// body, each length-prefixed.
//
// Canonical JSON is what a JSON reader cannot tell apart: object keys sorted
// (recursively), insignificant whitespace removed, strings re-encoded one
// way (so "\u00e9" and "é" are equal), numbers kept exactly as written (1 and
// 1.0 differ; the handler may well treat them differently). Duplicate object
// keys keep the last value, as encoding/json does when the handler decodes.
// A body that is not a single valid UTF-8 JSON value is fingerprinted by its
// raw bytes, so no two different invalid bodies collide.
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	msgapi.Frame(h, method)
	msgapi.Frame(h, path)
	if c, ok := canonicalJSON(body); ok {
		msgapi.Frame(h, "json")
		msgapi.Frame(h, c)
	} else {
		msgapi.Frame(h, "raw")
		msgapi.Frame(h, body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func canonicalJSON(body []byte) ([]byte, bool) {
	if !utf8.Valid(body) {
		return nil, false // encoding/json would silently turn bad bytes into U+FFFD
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data after the value
	}
	// encoding/json writes maps with sorted keys, no whitespace, one string
	// escaping, and a json.Number as its literal: that is the canonical form.
	c, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return c, true
}

// RecordID is the _id of the idempotency record for one key: hex SHA-256
// over the workspace, method, path and key, length-prefixed. Keys are scoped
// to all four, so two workspaces that pick the same key never meet.
func RecordID(workspaceID, method, path, key string) string {
	return msgapi.HashFields(workspaceID, method, path, key)
}

// keyOf finds the request's key: the header, or the body member when one
// is named (""/absent: no key), and the body to fingerprint, which leaves
// the member out so that a key moved between header and body, or added to
// a body, is the same request. A body member that is not a valid key, and
// a header and member that disagree, are 400.
func keyOf(header []string, body []byte, member string) (key string, fpBody []byte, err error) {
	fpBody = body
	if len(header) > 1 {
		return "", nil, invalidKey("send one Idempotency-Key header, not several")
	}
	if len(header) == 1 {
		if key, err = ParseKey(header[0]); err != nil {
			return "", nil, err
		}
	}
	if member == "" {
		return key, fpBody, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return key, fpBody, nil // not an object: the handler says what is wrong
	}
	raw, ok := obj[member]
	if !ok {
		return key, fpBody, nil
	}
	delete(obj, member)
	if fpBody, err = json.Marshal(obj); err != nil {
		return "", nil, err
	}
	if string(raw) == "null" {
		return key, fpBody, nil
	}
	bad := func(msg string) error {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: msg, Fields: []msgapi.FieldError{{Field: member, Message: msg}}}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", nil, bad(member + " must be a string of 1–255 printable ASCII characters")
	}
	bk, err := ParseKey(s)
	if err != nil {
		return "", nil, bad(member + " must be 1–255 printable ASCII characters, as the Idempotency-Key header")
	}
	if key != "" && key != bk {
		return "", nil, bad("the Idempotency-Key header and the body's " + member + " differ; send one, or the same key in both")
	}
	return bk, fpBody, nil
}
