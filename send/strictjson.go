package send

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/msgapi/msgapi"
)

// The strict JSON reader: a send request is read member by member from raw
// JSON, so that every field's problem can be reported at once, keys match
// exactly, a key given twice is refused, and text that encoding/json would
// quietly change (invalid UTF-8, unpaired surrogates) is refused too.

// reqValidator collects field errors while the fields of one object are read.
type reqValidator struct {
	fields map[string]json.RawMessage
	dups   map[string]bool
	errs   []msgapi.FieldError
}

func (v *reqValidator) add(field, msg string) {
	v.errs = append(v.errs, msgapi.FieldError{Field: field, Message: msg})
}

func (v *reqValidator) failed(field string) bool {
	for _, e := range v.errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

// str reads the string field key of v.fields, reporting a problem as field
// path. Absent, null and wrong values all return "", false.
func (v *reqValidator) str(key, path string) (string, bool) {
	if path == "" {
		path = key
	}
	if v.dups[key] {
		v.add(path, "must appear only once")
		return "", false
	}
	s, msg := parseString(v.fields[key])
	if msg != "" {
		v.add(path, msg)
		return "", false
	}
	return s, true
}

// parseString decodes a raw JSON string. Absent and null are "" with no
// problem; anything else that is not valid UTF-8 text is a problem.
func parseString(raw json.RawMessage) (s, problem string) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	if raw[0] != '"' {
		return "", "must be a string"
	}
	if !reqValidText(raw) {
		return "", "must be valid UTF-8 (no invalid bytes or unpaired surrogates)"
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "must be a string"
	}
	return s, ""
}

// parseObject splits a JSON object into its members without decoding them,
// and reports the keys that occur more than once. Its error text is shown to
// the client.
func parseObject(data []byte) (map[string]json.RawMessage, map[string]bool, error) {
	trimmed := bytes.Trim(data, " \t\r\n") // JSON's white space only, as the fingerprint sees it
	if len(trimmed) == 0 {
		return nil, nil, errors.New("the request body is empty; send a JSON object")
	}
	if err := json.Unmarshal(trimmed, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, nil, fmt.Errorf("the request body is not valid JSON: %s (at byte %d)", se.Error(), se.Offset)
		}
		return nil, nil, errors.New("the request body is not valid JSON")
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil { // '{'
		return nil, nil, errors.New("the request body must be a JSON object")
	}
	fields := map[string]json.RawMessage{}
	var dups map[string]bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, errors.New("the request body is not valid JSON")
		}
		k, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, errors.New("the request body is not valid JSON")
		}
		if _, ok := fields[k]; ok {
			if dups == nil {
				dups = map[string]bool{}
			}
			dups[k] = true
		}
		fields[k] = raw
	}
	return fields, dups, nil
}

// reqValidText reports whether raw JSON text holds valid Unicode: valid
// UTF-8, and no \u escape of an unpaired UTF-16 surrogate. encoding/json
// would silently turn either into U+FFFD, changing the text.
func reqValidText(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; in valid JSON there is one
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := reqHex4(raw[i+1:])
		if !ok {
			return false
		}
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xDC00 { // a low surrogate without a high one before it
			return false
		}
		rest := raw[i+1:]
		if len(rest) < 6 || rest[0] != '\\' || rest[1] != 'u' {
			return false
		}
		lo, ok := reqHex4(rest[2:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return false
		}
		i += 6
	}
	return true
}

func reqHex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n), err == nil
}
