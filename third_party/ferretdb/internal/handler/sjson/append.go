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
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
)

// msgapi (PATCHES.md, patch 16): a document is encoded by appending to one
// buffer. Upstream's Marshal built every value, every key and every schema
// element in a buffer of its own (each through encoding/json's reflection),
// copied each into its parent's growing buffer, and the caller copied the
// result once more: a CPU profile of msgapi under load put it at 5.8 % of
// the process's CPU and a fifth of its allocated bytes, all of it inside
// the one writer. The bytes are exactly upstream's (marshal_test.go holds
// upstream's encoder and compares the two over every type and every kind
// of string and number): what is stored, what index expressions read and
// the schema texts that patch 14 keeps are unchanged.

// AppendMarshal appends the encoding of d that Marshal returns to dst.
func AppendMarshal(dst []byte, d *types.Document) ([]byte, error) {
	if d == nil {
		panic("v is nil")
	}

	dst = append(dst, `{"$s":`...)
	dst = appendSchemaForDoc(dst, d)

	for i := range d.Len() {
		key, value := d.FieldAt(i)
		// upstream writes the top-level keys as they are
		dst = append(dst, ',', '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')

		var err error
		if dst, err = appendValue(dst, value); err != nil {
			return nil, lazyerrors.Error(err)
		}
	}

	return append(dst, '}'), nil
}

// appendValue appends what toSJSON(v).MarshalJSON() returns.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case *types.Document:
		dst = append(dst, '{')
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			key, value := v.FieldAt(i)
			dst = appendString(dst, key)
			dst = append(dst, ':')
			var err error
			if dst, err = appendValue(dst, value); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case *types.Array:
		dst = append(dst, '[')
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			el, err := v.Get(i)
			if err != nil {
				return nil, lazyerrors.Error(err)
			}
			if dst, err = appendValue(dst, el); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case float64:
		return appendFloat(dst, v)
	case string:
		return appendString(dst, v), nil
	case types.Binary:
		if v.B == nil {
			return append(dst, "null"...), nil // json.Marshal of a nil []byte
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.B)
		return append(dst, '"'), nil
	case types.ObjectID:
		dst = append(dst, '"')
		dst = hex.AppendEncode(dst, v[:])
		return append(dst, '"'), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case time.Time:
		return strconv.AppendInt(dst, v.UnixMilli(), 10), nil
	case types.NullType:
		return append(dst, "null"...), nil
	case types.Regex:
		return appendString(dst, v.Pattern), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case types.Timestamp:
		return strconv.AppendUint(dst, uint64(v), 10), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	}

	panic(fmt.Sprintf("not reached: %T", v)) // as toSJSON
}

// appendSchemaForDoc appends what marshalSchemaForDoc returns.
func appendSchemaForDoc(dst []byte, d *types.Document) []byte {
	if d.Len() == 0 {
		return append(dst, "{}"...)
	}

	dst = append(dst, `{"p":{`...)
	for i := range d.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		key, value := d.FieldAt(i)
		dst = appendString(dst, key)
		dst = append(dst, ':')
		dst = appendElem(dst, value)
	}

	dst = append(dst, `},"$k":[`...)
	for i := range d.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		key, _ := d.FieldAt(i)
		dst = appendString(dst, key)
	}

	return append(dst, "]}"...)
}

// appendElem appends what marshalElemForSingleValue returns.
func appendElem(dst []byte, v any) []byte {
	switch v := v.(type) {
	case *types.Document:
		dst = append(dst, `{"t":"object","$s":`...)
		dst = appendSchemaForDoc(dst, v)
		return append(dst, '}')
	case *types.Array:
		dst = append(dst, `{"t":"array","i":[`...)
		for i := range v.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			el, err := v.Get(i)
			if err != nil {
				panic(err) // as upstream's must.NotFail: i < v.Len()
			}
			dst = appendElem(dst, el)
		}
		return append(dst, "]}"...)
	case float64:
		return append(dst, `{"t":"double"}`...)
	case string:
		return append(dst, `{"t":"string"}`...)
	case types.Binary:
		dst = append(dst, `{"t":"binData","s":`...)
		dst = strconv.AppendUint(dst, uint64(v.Subtype), 10)
		return append(dst, '}')
	case types.ObjectID:
		return append(dst, `{"t":"objectId"}`...)
	case bool:
		return append(dst, `{"t":"bool"}`...)
	case time.Time:
		return append(dst, `{"t":"date"}`...)
	case types.NullType:
		return append(dst, `{"t":"null"}`...)
	case types.Regex:
		dst = append(dst, `{"t":"regex","o":`...)
		dst = appendString(dst, v.Options)
		return append(dst, '}')
	case int32:
		return append(dst, `{"t":"int"}`...)
	case types.Timestamp:
		return append(dst, `{"t":"timestamp"}`...)
	case int64:
		return append(dst, `{"t":"long"}`...)
	}

	panic(fmt.Sprintf("sjson.marshalElemForSingleValue: unknown type %[1]T (value %[1]q)", v))
}

// appendFloat appends f as json.Marshal does (ES6 number formatting), and
// refuses NaN and ±Inf as it does.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}

	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}

	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}

	return dst, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as json.Marshal quotes a string: HTML
// characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029
// escaped (encoding/json's appendString with escapeHTML set).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// htmlSafe reports whether an ASCII byte goes into a JSON string as is,
// HTML's <, > and & being escaped (encoding/json's htmlSafeSet).
func htmlSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}
