// Package logcap bounds log lines before they reach a sink (stdout, Loki).
//
// A log field can carry what a client sent — a path segment, a provider's
// error text — and one long value repeated by a flood multiplies into the
// sinks' memory and disk. Every JSON line is cut to MaxField bytes per string
// value and MaxLine bytes in all, with a visible marker, and stays valid
// JSON when only values were cut, so LogQL's | json still reads it.
package logcap

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// Defaults: a field is an id, a message or an error text, well under 2 KiB;
// a line is a few hundred bytes, and Loki's own default limit is 256 KB.
const (
	MaxField = 2 << 10
	MaxLine  = 16 << 10
)

// Marker starts what replaces the cut-off tail of a value or a line.
const Marker = "…[truncated "

// Line returns p with every string value longer than maxField bytes (as
// JSON text) cut, and the whole line kept within about maxLine bytes, and
// whether it changed anything. A JSON object stays a JSON object: members
// that do not fit are replaced by one "truncated" member. Anything else is
// cut to maxLine bytes. p itself is never modified; an unchanged line is p.
// A trailing newline is kept. It runs in one pass over p: a long line costs
// no more than reading it.
func Line(p []byte, maxField, maxLine int) ([]byte, bool) {
	if len(p) <= maxField && len(p) <= maxLine {
		return p, false // no value can be longer than the line
	}
	body, nl := bytes.CutSuffix(p, []byte("\n"))
	out, changed := capObject(body, maxField, maxLine)
	if out == nil { // not an object this scanner reads
		out, changed = body, false
		if len(body) > maxLine {
			kept := cut(body, maxLine)
			out = append(kept, marker(len(body)-len(kept))...)
			changed = true
		}
	}
	if !changed {
		return p, false
	}
	if nl {
		out = append(out, '\n')
	}
	return out, true
}

func marker(n int) string { return fmt.Sprintf("%s%d bytes]", Marker, n) }

// capObject rewrites a JSON object with its long string values cut and,
// past maxLine, its last members folded into "truncated". It returns nil
// when p is not a JSON object it can scan.
func capObject(p []byte, maxField, maxLine int) ([]byte, bool) {
	i := skipSpace(p, 0)
	if i == len(p) || p[i] != '{' {
		return nil, false
	}
	type member struct{ key, val []byte }
	var ms []member
	changed := false
	for i = skipSpace(p, i+1); i < len(p) && p[i] != '}'; {
		if p[i] == ',' && len(ms) > 0 {
			i = skipSpace(p, i+1)
		}
		k, ok := scanString(p, i)
		if !ok {
			return nil, false
		}
		j := skipSpace(p, k)
		if j == len(p) || p[j] != ':' {
			return nil, false
		}
		j = skipSpace(p, j+1)
		v, ok := scanValue(p, j)
		if !ok {
			return nil, false
		}
		m := member{key: p[i:k], val: p[j:v]}
		if len(m.val)-2 > maxField && m.val[0] == '"' {
			m.val, changed = cutString(m.val, maxField), true
		}
		ms = append(ms, m)
		i = skipSpace(p, v)
	}
	if i == len(p) {
		return nil, false
	}
	if !changed && len(p) <= maxLine {
		return p, false
	}
	out := make([]byte, 0, min(len(p), maxLine)+64)
	out = append(out, '{')
	for n, m := range ms {
		size := len(m.key) + 1 + len(m.val) + 1
		if len(out)+size > maxLine-40 { // room for the "truncated" member
			rest := 0
			for _, r := range ms[n:] {
				rest += len(r.key) + 1 + len(r.val) + 1
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, `"truncated":"`+marker(rest)+`"`...)
			changed = true
			break
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m.key...), ':'), m.val...)
	}
	return append(out, '}'), changed
}

// cutString cuts a JSON string literal to about n bytes of its text, never
// inside an escape or a UTF-8 sequence, and appends the marker.
func cutString(lit []byte, n int) []byte {
	text := lit[1 : len(lit)-1]
	j := 0
	for j < len(text) {
		step := 1
		if text[j] == '\\' {
			step = 2
			if j+1 < len(text) && text[j+1] == 'u' {
				step = 6
			}
		}
		if j+step > n {
			break
		}
		j += step
	}
	for j > 0 && j < len(text) && !utf8.RuneStart(text[j]) {
		j--
	}
	out := make([]byte, 0, j+32)
	out = append(append(append(out, '"'), text[:j]...), marker(len(text)-j)...)
	return append(out, '"')
}

func skipSpace(p []byte, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n') {
		i++
	}
	return i
}

// scanString returns the index just past the string literal at p[i]. It
// finds quotes and backslashes with IndexByte, each byte looked at once.
func scanString(p []byte, i int) (int, bool) {
	if i >= len(p) || p[i] != '"' {
		return 0, false
	}
	q := -1 // the next quote at or after j
	for j := i + 1; j < len(p); {
		if q < j {
			k := bytes.IndexByte(p[j:], '"')
			if k < 0 {
				return 0, false
			}
			q = j + k
		}
		k := bytes.IndexByte(p[j:q], '\\')
		if k < 0 {
			return q + 1, true
		}
		j += k + 2 // the escaped byte, maybe that quote, is part of the string
	}
	return 0, false
}

// scanValue returns the index just past the JSON value at p[i].
func scanValue(p []byte, i int) (int, bool) {
	if i >= len(p) {
		return 0, false
	}
	switch p[i] {
	case '"':
		return scanString(p, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(p); j++ {
			switch p[j] {
			case '"':
				e, ok := scanString(p, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(p) && p[j] != ',' && p[j] != '}' && p[j] != ' ' && p[j] != '\n' {
		j++
	}
	return j, j > i
}

// cut returns a copy of at most n bytes of p, not splitting a UTF-8 sequence.
func cut(p []byte, n int) []byte {
	if len(p) <= n {
		return p
	}
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return append([]byte(nil), p[:n]...)
}

// Writer caps each line written to w with the defaults. It keeps zerolog's
// levels when w is a zerolog.LevelWriter (zerolog.MultiLevelWriter).
func Writer(w io.Writer) zerolog.LevelWriter {
	lw, ok := w.(zerolog.LevelWriter)
	if !ok {
		lw = zerolog.LevelWriterAdapter{Writer: w}
	}
	return writer{lw}
}

type writer struct{ w zerolog.LevelWriter }

func (c writer) Write(p []byte) (int, error) {
	q, _ := Line(p, MaxField, MaxLine)
	if _, err := c.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c writer) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	q, _ := Line(p, MaxField, MaxLine)
	if _, err := c.w.WriteLevel(l, q); err != nil {
		return 0, err
	}
	return len(p), nil
}
