package logcap_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/logcap"
)

func TestLine(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := []struct {
		name        string
		in          string
		field, line int
		want        string
		wantChanged bool
	}{
		{"short line untouched", `{"a":"b"}` + "\n", 10, 100, `{"a":"b"}` + "\n", false},
		{"long values within the caps untouched", `{"a":"` + long + `","n":1}` + "\n", 100, 200, `{"a":"` + long + `","n":1}` + "\n", false},
		{"long string value cut, order and other fields kept, still JSON",
			`{"level":"warn","workspaceId":"` + long + `","n":12,"ok":true,"o":{"x":1}}` + "\n", 10, 1000,
			`{"level":"warn","workspaceId":"aaaaaaaaaa…[truncated 90 bytes]","n":12,"ok":true,"o":{"x":1}}` + "\n", true},
		{"values are measured as JSON text and never cut inside an escape",
			`{"m":"<a&b>\"q\"\u00e9","k":"<a&b>\"q\"","v":"` + long + `"}`, 10, 1000,
			`{"m":"<a&b>\"q\"…[truncated 6 bytes]","k":"<a&b>\"q\"","v":"aaaaaaaaaa…[truncated 90 bytes]"}`, true},
		{"many short fields: the last ones fold into one member",
			`{"a":"0123456789","b":"0123456789","c":"0123456789","d":{"e":[1,"}"]},"f":true}`, 20, 75,
			`{"a":"0123456789","b":"0123456789","truncated":"…[truncated 44 bytes]"}`, true},
		{"nested values and spaces are read, not cut",
			`{ "o" : {"s":"` + long + `","a":[1,2,{"b":"]"}]} , "n" : -1.5e3 }`, 20, 1000,
			`{ "o" : {"s":"` + long + `","a":[1,2,{"b":"]"}]} , "n" : -1.5e3 }`, false},
		{"not JSON: the line is cut", strings.Repeat("x", 50) + "\n", 10, 20,
			strings.Repeat("x", 20) + "…[truncated 30 bytes]\n", true},
		{"a value is cut on a rune boundary", `{"v":"` + strings.Repeat("é", 10) + `"}`, 5, 1000,
			`{"v":"éé…[truncated 16 bytes]"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			orig := append([]byte(nil), in...)
			got, changed := logcap.Line(in, tt.field, tt.line)
			if string(got) != tt.want || changed != tt.wantChanged {
				t.Errorf("Line = %s (changed %v)\nwant   %s (changed %v)", got, changed, tt.want, tt.wantChanged)
			}
			if !bytes.Equal(in, orig) {
				t.Errorf("Line modified its input: %s", in)
			}
			if !utf8.Valid(got) {
				t.Errorf("Line produced invalid UTF-8: %q", got)
			}
			if json.Valid(in) && !json.Valid(got) {
				t.Errorf("a JSON line is no longer JSON: %s", got)
			}
		})
	}
}

// The defaults hold for a line as zerolog writes it, whatever a client put
// in a field.
func TestWriterDefaults(t *testing.T) {
	var out bytes.Buffer
	log := zerolog.New(logcap.Writer(zerolog.MultiLevelWriter(&out)))
	log.Warn().Str("workspaceId", strings.Repeat("w", 60_000)).Str("channel", "email").Msg("refused")
	line := out.Bytes()
	if len(line) > logcap.MaxField+200 {
		t.Errorf("line is %d bytes, want about MaxField (%d)", len(line), logcap.MaxField)
	}
	var f map[string]string
	if err := json.Unmarshal(line, &f); err != nil {
		t.Fatalf("capped line is not JSON: %v", err)
	}
	if f["level"] != "warn" || f["channel"] != "email" || !strings.Contains(f["workspaceId"], logcap.Marker+"57952 bytes]") {
		t.Errorf("fields = level %q channel %q workspaceId …%q", f["level"], f["channel"], f["workspaceId"][logcap.MaxField-5:])
	}
}

type levels struct{ got []zerolog.Level }

func (l *levels) Write(p []byte) (int, error) { return len(p), nil }
func (l *levels) WriteLevel(lv zerolog.Level, p []byte) (int, error) {
	l.got = append(l.got, lv)
	return len(p), nil
}

func TestWriterKeepsLevels(t *testing.T) {
	var l levels
	log := zerolog.New(logcap.Writer(&l))
	log.Warn().Msg("")
	log.Error().Str("x", strings.Repeat("x", 5000)).Msg("")
	if len(l.got) != 2 || l.got[0] != zerolog.WarnLevel || l.got[1] != zerolog.ErrorLevel {
		t.Errorf("levels = %v, want [warn error]", l.got)
	}
}

func FuzzLine(f *testing.F) {
	f.Add([]byte(`{"level":"warn","workspaceId":"`+strings.Repeat("w", 300)+`","n":1}`+"\n"), uint16(16), uint16(120))
	f.Add([]byte(`{"a":"\u00e9\"\\","b":{"c":["}",1]},"d":"`+strings.Repeat("é", 50)+`"}`), uint16(8), uint16(60))
	f.Add([]byte(`not json `+strings.Repeat("x", 100)), uint16(10), uint16(20))
	f.Add([]byte(`{"a":"unterminated`), uint16(3), uint16(10))
	f.Fuzz(func(t *testing.T, p []byte, field, line uint16) {
		maxField, maxLine := 1+int(field%4096), 64+int(line%8192)
		got, changed := logcap.Line(p, maxField, maxLine)
		if !changed && !bytes.Equal(got, p) {
			t.Fatalf("unchanged but different: %q → %q", p, got)
		}
		if utf8.Valid(p) && !utf8.Valid(got) {
			t.Fatalf("valid UTF-8 in, invalid out: %q → %q", p, got)
		}
		if obj := bytes.TrimSpace(p); len(obj) > 0 && obj[0] == '{' && json.Valid(obj) && !json.Valid(got) {
			t.Fatalf("JSON object in, not JSON out: %q → %q", p, got)
		}
		if changed && len(got) > maxLine+64 {
			t.Fatalf("%d bytes out, over maxLine %d", len(got), maxLine)
		}
	})
}
