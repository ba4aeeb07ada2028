package send

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// metadata returns the metadata object with its numbers as json.Number, so
// they round-trip exactly. Besides the size limit it refuses what the stores
// cannot hold, so that a bad object is a 400 here and not a 500 at insert
// time: keys starting with "$" or containing "." or NUL, arrays nested
// directly in arrays, and numbers beyond float64 (the embedded engine
// rejects all of these; BSON keys cannot contain NUL), and nesting deeper
// than reqMaxMetadataDepth (MongoDB allows 100 levels per document).
func (v *reqValidator) metadata() map[string]any {
	const key = "metadata"
	if v.dups[key] {
		v.add(key, "must appear only once")
		return nil
	}
	raw := v.fields[key]
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] != '{' {
		v.add(key, "must be a JSON object")
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		v.add(key, "must be a JSON object")
		return nil
	}
	if compact.Len() > reqMaxMetadata {
		v.add(key, fmt.Sprintf("must be at most %d bytes as compact JSON", reqMaxMetadata))
		return nil
	}
	if !reqValidText(raw) {
		v.add(key, "must be valid UTF-8 (no invalid bytes or unpaired surrogates)")
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		v.add(key, "must be a JSON object")
		return nil
	}
	val, err := parseMetadataValue(dec, tok, key, 0)
	if err != nil {
		v.add(key, err.Error())
		return nil
	}
	m, _ := val.(map[string]any)
	return m
}

// parseMetadataValue decodes the value that starts with tok. path names it
// in errors, e.g. metadata.order.items[2].
func parseMetadataValue(dec *json.Decoder, tok json.Token, path string, depth int) (any, error) {
	if depth >= reqMaxMetadataDepth {
		return nil, fmt.Errorf("must not be nested more than %d levels deep", reqMaxMetadataDepth)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, errors.New("must be a JSON object")
				}
				k, _ := kt.(string)
				kpath := parseMetadataPath(path, k)
				if strings.HasPrefix(k, "$") || strings.ContainsAny(k, ".\x00") {
					return nil, fmt.Errorf(`keys must not start with "$" or contain "." or NUL (at %s)`, kpath)
				}
				if _, dup := m[k]; dup {
					return nil, fmt.Errorf("keys must appear only once (at %s)", kpath)
				}
				vt, err := dec.Token()
				if err != nil {
					return nil, errors.New("must be a JSON object")
				}
				val, err := parseMetadataValue(dec, vt, kpath, depth+1)
				if err != nil {
					return nil, err
				}
				m[k] = val
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, errors.New("must be a JSON object")
			}
			return m, nil
		}
		a := []any{}
		for i := 0; dec.More(); i++ {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			vt, err := dec.Token()
			if err != nil {
				return nil, errors.New("must be a JSON object")
			}
			if vt == json.Delim('[') {
				return nil, fmt.Errorf("arrays must not directly contain arrays (at %s)", ipath)
			}
			val, err := parseMetadataValue(dec, vt, ipath, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, val)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, errors.New("must be a JSON object")
		}
		return a, nil
	case json.Number:
		if _, err := strconv.ParseFloat(string(t), 64); err != nil {
			return nil, fmt.Errorf("numbers must fit in a 64-bit float (at %s)", path)
		}
		return t, nil
	}
	return tok, nil // string, bool or nil
}

// parseMetadataPath extends path by key, shortening long keys so that an
// error message stays readable.
func parseMetadataPath(path, key string) string {
	const max = 40
	if len(key) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(key[cut]) {
			cut--
		}
		key = key[:cut] + "…"
	}
	return path + "." + key
}
