package workspace

import (
	"encoding/json"
	"testing"
	"time"
)

func TestQuietHoursUntil(t *testing.T) {
	night := QuietHours{Start: "21:00", End: "08:00", Mode: QuietDefer, TimeZone: "America/New_York"}
	ny, _ := time.LoadLocation("America/New_York")
	la, _ := time.LoadLocation("America/Los_Angeles")
	for _, tc := range []struct {
		name  string
		q     QuietHours
		at    time.Time
		zones []string
		want  time.Time // zero: outside
	}{
		{"evening, before midnight", night, time.Date(2026, 12, 4, 22, 30, 0, 0, ny), []string{"America/New_York"}, time.Date(2026, 12, 5, 8, 0, 0, 0, ny)},
		{"after midnight", night, time.Date(2026, 12, 5, 3, 0, 0, 0, ny), nil, time.Date(2026, 12, 5, 8, 0, 0, 0, ny)},
		{"daytime", night, time.Date(2026, 12, 5, 12, 0, 0, 0, ny), nil, time.Time{}},
		{"the end minute is outside", night, time.Date(2026, 12, 5, 8, 0, 0, 0, ny), nil, time.Time{}},
		{"the start minute is inside", night, time.Date(2026, 12, 5, 21, 0, 0, 0, ny), nil, time.Date(2026, 12, 6, 8, 0, 0, 0, ny)},
		// 07:30 in New York is 04:30 in Los Angeles: an ambiguous number
		// waits for 08:00 in the later zone.
		{"the strictest of two zones", night, time.Date(2026, 12, 5, 7, 30, 0, 0, ny), []string{"America/New_York", "America/Los_Angeles"}, time.Date(2026, 12, 5, 8, 0, 0, 0, la)},
		// 20:30 in Los Angeles is 23:30 in New York: quiet in one is quiet.
		{"quiet in one zone only", night, time.Date(2026, 12, 5, 20, 30, 0, 0, la), []string{"America/Los_Angeles", "America/New_York"}, time.Date(2026, 12, 6, 8, 0, 0, 0, la)},
		{"a same-day window", QuietHours{Start: "12:00", End: "13:30", TimeZone: "UTC"}, time.Date(2026, 12, 5, 12, 59, 0, 0, time.UTC), nil, time.Date(2026, 12, 5, 13, 30, 0, 0, time.UTC)},
		{"unknown zones take the workspace's", night, time.Date(2026, 12, 4, 22, 30, 0, 0, ny), []string{"Etc/Unknown"}, time.Date(2026, 12, 5, 8, 0, 0, 0, ny)},
	} {
		got, in := tc.q.Until(tc.at, tc.zones)
		if in != !tc.want.IsZero() || (in && !got.Equal(tc.want)) {
			t.Errorf("%s: Until = %v, %v; want %v", tc.name, got, in, tc.want)
		}
	}
}

func TestQuietHoursSetting(t *testing.T) {
	for _, bad := range []string{
		`{"start":"21:00","end":"21:00","mode":"defer","timeZone":"UTC"}`,
		`{"start":"25:00","end":"08:00","mode":"defer","timeZone":"UTC"}`,
		`{"start":"21:00","end":"08:00","mode":"later","timeZone":"UTC"}`,
		`{"start":"21:00","end":"08:00","mode":"defer","timeZone":"Mars/Olympus"}`,
		`{"start":"21:00","end":"08:00","mode":"defer"}`,
		`{"start":"21:00","end":"08:00","mode":"defer","timeZone":"UTC","extra":1}`,
		`"21-08"`,
	} {
		if _, err := ParseSettingsPatch(json.RawMessage(`{"quietHours":` + bad + `}`)); err == nil {
			t.Errorf("quietHours %s accepted", bad)
		}
	}
	p, err := ParseSettingsPatch([]byte(`{"quietHours":{"start":"21:00","end":"08:00","mode":"refuse","timeZone":"Europe/Berlin"}}`))
	if err != nil || p.Empty() {
		t.Fatalf("a valid quietHours: %v", err)
	}
	if p, err := ParseSettingsPatch([]byte(`{"quietHours":null}`)); err != nil || len(p.unset) != 1 {
		t.Errorf("quietHours null: %v %v", p, err)
	}
}
