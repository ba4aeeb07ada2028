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

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/FerretDB/FerretDB/internal/types"
)

// msgapi (PATCHES.md, patch 17): a stored document read in one pass.
//
// Unmarshal decoded a document with encoding/json twice over: the whole
// text into a map of raw values (checking all of it, and copying each value
// out), then each value again (checking it again), through reflection. A
// document the engine wrote itself has one exact form — Marshal's: no
// whitespace, the schema first, then the fields in the schema's order, each
// key as Marshal writes it — and unmarshalFast reads exactly that form, in
// one pass that checks the JSON syntax of everything it reads and decodes
// each value by its schema. Anything else, a document damaged or written by
// another encoder, or a value it does not decode itself, makes it give up,
// and Unmarshal decodes the text as before, with the same answer or the
// same error. unmarshal_test.go compares the two over random documents of
// every type and over damaged copies of them.

// maxFastDepth bounds the nesting unmarshalFast follows; deeper documents
// take the other way (FerretDB refuses documents nested more than 100 deep).
const maxFastDepth = 128

// unmarshalFast decodes data if it is in Marshal's exact form; ok is false
// otherwise, and then nothing is decoded.
func unmarshalFast(data []byte) (*types.Document, bool) {
	const prefix = `{"$s":`
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return nil, false
	}
	p := data[len(prefix):]
	n := skipValue(p, 0)
	if n <= 0 {
		return nil, false
	}
	sch, err := decodeSchema(p[:n])
	if err != nil || !sch.fastTop {
		return nil, false
	}
	p = p[n:]

	d := types.MakeDocument(len(sch.Keys))
	for _, key := range sch.Keys {
		// ,"key": (the top-level keys are written as they are)
		if len(p) < len(key)+4 || p[0] != ',' || p[1] != '"' || string(p[2:2+len(key)]) != key ||
			p[2+len(key)] != '"' || p[3+len(key)] != ':' {
			return nil, false
		}
		p = p[len(key)+4:]
		n := skipValue(p, 0)
		if n <= 0 {
			return nil, false
		}
		v, ok := decodeFast(p[:n], sch.Properties[key], 0)
		if !ok {
			return nil, false
		}
		d.Set(key, v)
		p = p[n:]
	}
	if len(p) != 1 || p[0] != '}' {
		return nil, false
	}
	return d, true
}

// decodeFast decodes raw, one JSON value whose syntax skipValue checked,
// by its schema element, as unmarshalSingleValue does.
func decodeFast(raw []byte, el *elem, depth int) (any, bool) {
	if string(raw) == "null" {
		return types.Null, true // whatever the schema says, as upstream
	}
	if el == nil || depth > maxFastDepth {
		return nil, false
	}
	switch el.Type {
	case elemTypeObject:
		if el.Schema == nil {
			return nil, false // upstream refuses an object without a schema, even {}
		}
		return decodeObjectFast(raw, el.Schema, depth+1)
	case elemTypeArray:
		return decodeArrayFast(raw, el.Items, depth+1)
	case elemTypeString:
		return decodeStringFast(raw)
	case elemTypeDouble:
		if raw[0] == '"' || raw[0] == '{' || raw[0] == '[' || raw[0] == 't' || raw[0] == 'f' {
			return nil, false
		}
		f, err := strconv.ParseFloat(bytesString(raw), 64)
		if err != nil {
			return nil, false
		}
		return f, true
	case elemTypeInt:
		i, err := strconv.ParseInt(bytesString(raw), 10, 32)
		if err != nil {
			return nil, false
		}
		return int32(i), true
	case elemTypeLong:
		i, err := strconv.ParseInt(bytesString(raw), 10, 64)
		if err != nil {
			return nil, false
		}
		return i, true
	case elemTypeDate:
		i, err := strconv.ParseInt(bytesString(raw), 10, 64)
		if err != nil {
			return nil, false
		}
		return time.UnixMilli(i), true
	case elemTypeTimestamp:
		u, err := strconv.ParseUint(bytesString(raw), 10, 64)
		if err != nil {
			return nil, false
		}
		return types.Timestamp(u), true
	case elemTypeBool:
		switch string(raw) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		return nil, false
	case elemTypeObjectID:
		var o types.ObjectID
		if len(raw) != 2*len(o)+2 || raw[0] != '"' {
			return nil, false
		}
		if _, err := hex.Decode(o[:], raw[1:len(raw)-1]); err != nil {
			return nil, false
		}
		return o, true
	case elemTypeBinData, elemTypeRegex:
		v, err := unmarshalSingleValue(raw, el) // rare: upstream's decoder
		if err != nil {
			return nil, false
		}
		return v, true
	}
	return nil, false // elemTypeNull with a value that is not null, or an unknown type
}

// decodeObjectFast decodes a nested document: {"key":value,...} in the
// schema's order, each key quoted as Marshal quotes it.
func decodeObjectFast(raw []byte, sch *schema, depth int) (any, bool) {
	if string(raw) == "{}" {
		return new(types.Document), true // upstream's empty document, whatever the schema
	}
	if !sch.fastNested || len(sch.Keys) == 0 {
		return nil, false
	}
	d := types.MakeDocument(len(sch.Keys))
	p := raw[1:] // skipValue checked that raw is an object
	for i, key := range sch.Keys {
		if i > 0 {
			if len(p) == 0 || p[0] != ',' {
				return nil, false
			}
			p = p[1:]
		}
		if len(p) < len(key)+3 || p[0] != '"' || string(p[1:1+len(key)]) != key || p[1+len(key)] != '"' || p[2+len(key)] != ':' {
			return nil, false
		}
		p = p[len(key)+3:]
		n := skipValue(p, depth)
		if n <= 0 {
			return nil, false
		}
		v, ok := decodeFast(p[:n], sch.Properties[key], depth)
		if !ok {
			return nil, false
		}
		d.Set(key, v)
		p = p[n:]
	}
	if len(p) != 1 || p[0] != '}' {
		return nil, false
	}
	return d, true
}

// decodeArrayFast decodes an array with one schema element per value.
func decodeArrayFast(raw []byte, items []*elem, depth int) (any, bool) {
	if items == nil {
		return nil, false // upstream refuses an array schema without items
	}
	a := types.MakeArray(len(items))
	p := raw[1:] // skipValue checked that raw is an array
	if len(items) == 0 {
		if string(raw) != "[]" {
			return nil, false
		}
		return a, true
	}
	for i, item := range items {
		if i > 0 {
			if len(p) == 0 || p[0] != ',' {
				return nil, false
			}
			p = p[1:]
		}
		n := skipValue(p, depth)
		if n <= 0 {
			return nil, false
		}
		v, ok := decodeFast(p[:n], item, depth)
		if !ok {
			return nil, false
		}
		a.Append(v)
		p = p[n:]
	}
	if len(p) != 1 || p[0] != ']' {
		return nil, false
	}
	return a, true
}

// decodeStringFast decodes a JSON string: a copy of its bytes when it has
// no escape and is valid UTF-8 (what encoding/json returns then), else
// through encoding/json.
func decodeStringFast(raw []byte) (any, bool) {
	if raw[0] != '"' {
		return nil, false
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true // skipValue refused control characters
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false
	}
	return s, true
}

// bytesString is b as a string without a copy, for strconv's parsers,
// which do not keep their argument (an error they return may, and is
// dropped here).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// skipValue returns the length of the JSON value that p starts with, or 0
// when p does not start with one. It accepts no whitespace anywhere, which
// Marshal never writes.
func skipValue(p []byte, depth int) int {
	if len(p) == 0 || depth > maxFastDepth {
		return 0
	}
	switch c := p[0]; {
	case c == '"':
		return skipString(p)
	case c == '{':
		i := 1
		if i < len(p) && p[i] == '}' {
			return 2
		}
		for {
			n := skipString(p[i:])
			if n == 0 {
				return 0
			}
			i += n
			if i >= len(p) || p[i] != ':' {
				return 0
			}
			i++
			if n = skipValue(p[i:], depth+1); n == 0 {
				return 0
			}
			i += n
			if i >= len(p) {
				return 0
			}
			switch p[i] {
			case ',':
				i++
			case '}':
				return i + 1
			default:
				return 0
			}
		}
	case c == '[':
		i := 1
		if i < len(p) && p[i] == ']' {
			return 2
		}
		for {
			n := skipValue(p[i:], depth+1)
			if n == 0 {
				return 0
			}
			i += n
			if i >= len(p) {
				return 0
			}
			switch p[i] {
			case ',':
				i++
			case ']':
				return i + 1
			default:
				return 0
			}
		}
	case c == 't':
		return skipLiteral(p, "true")
	case c == 'f':
		return skipLiteral(p, "false")
	case c == 'n':
		return skipLiteral(p, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(p)
	}
	return 0
}

func skipLiteral(p []byte, lit string) int {
	if len(p) >= len(lit) && string(p[:len(lit)]) == lit {
		return len(lit)
	}
	return 0
}

// skipString: a quote, then characters (none below U+0020; escapes \" \\
// \/ \b \f \n \r \t \uXXXX), then a quote.
func skipString(p []byte) int {
	if len(p) < 2 || p[0] != '"' {
		return 0
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return 0
		case c == '\\':
			i++
			if i >= len(p) {
				return 0
			}
			switch p[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(p) {
					return 0
				}
				for _, h := range p[i+1 : i+5] {
					if !isHex(h) {
						return 0
					}
				}
				i += 4
			default:
				return 0
			}
		}
	}
	return 0
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipNumber: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(p []byte) int {
	i := 0
	if p[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		return j - i
	}
	switch {
	case i < len(p) && p[i] == '0':
		i++
	case digits() > 0:
		i += digits()
	default:
		return 0
	}
	if i < len(p) && p[i] == '.' {
		i++
		n := digits()
		if n == 0 {
			return 0
		}
		i += n
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		n := digits()
		if n == 0 {
			return 0
		}
		i += n
	}
	return i
}

// markFast sets which of sch's schemas unmarshalFast may read: those whose
// keys are all distinct and written by Marshal as they are (printable
// ASCII that JSON does not escape), and at the top level none of them
// "$s". Done once for a decoded schema, before it is shared.
func markFast(sch *schema) {
	sch.fastTop = markKeys(sch, true)
	for _, el := range sch.Properties {
		markElem(el)
	}
}

func markElem(el *elem) {
	if el == nil {
		return
	}
	if el.Schema != nil {
		el.Schema.fastNested = markKeys(el.Schema, false)
		for _, p := range el.Schema.Properties {
			markElem(p)
		}
	}
	for _, it := range el.Items {
		markElem(it)
	}
}

func markKeys(sch *schema, top bool) bool {
	seen := make(map[string]struct{}, len(sch.Keys))
	for _, k := range sch.Keys {
		if _, dup := seen[k]; dup || (top && k == "$s") {
			return false
		}
		seen[k] = struct{}{}
		for i := range len(k) {
			if !htmlSafe(k[i]) || k[i] >= utf8.RuneSelf {
				return false
			}
		}
	}
	return true
}
