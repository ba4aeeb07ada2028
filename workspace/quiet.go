package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	_ "time/tzdata" // time zones on machines without a zoneinfo database
)

// QuietHours is a daily window, in the recipient's local time, in which
// the workspace's messages do not go out (README: Quiet hours). Start and
// End are "HH:MM"; a window whose end is before its start runs past
// midnight ("21:00" to "08:00"). TimeZone is the zone of recipients whose
// own zone is unknown (email addresses, numbers the time-zone map does not
// place).
type QuietHours struct {
	Start    string `bson:"start" json:"start"`
	End      string `bson:"end" json:"end"`
	Mode     string `bson:"mode" json:"mode"`
	TimeZone string `bson:"timeZone" json:"timeZone"`
}

// Quiet-hours modes.
const (
	// QuietDefer: a send inside the window is scheduled for its end.
	QuietDefer = "defer"
	// QuietRefuse: a send inside the window is refused, with Retry-After
	// at its end.
	QuietRefuse = "refuse"
)

func parseQuietHours(raw json.RawMessage) (QuietHours, string) {
	const msg = `an object {"start": "21:00", "end": "08:00", "mode": "defer" or "refuse", "timeZone": "America/New_York"} (start and end differ; an IANA time zone), or null for none`
	var q QuietHours
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if d.Decode(&q) != nil {
		return QuietHours{}, msg
	}
	s, okS := clock(q.Start)
	e, okE := clock(q.End)
	if !okS || !okE || s == e || (q.Mode != QuietDefer && q.Mode != QuietRefuse) || q.TimeZone == "" {
		return QuietHours{}, msg
	}
	if _, err := time.LoadLocation(q.TimeZone); err != nil {
		return QuietHours{}, msg
	}
	return q, ""
}

// clock reads "HH:MM" as minutes after midnight.
func clock(s string) (int, bool) {
	var h, m int
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	if _, err := fmt.Sscanf(s, "%02d:%02d", &h, &m); err != nil || h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}

// Until reports whether t falls inside the window in any of zones (the
// recipient's possible time zones; none: TimeZone), and if so the first
// time at or after t that is outside it in every one of them: an
// ambiguous number takes the strictest of its zones. Unknown zone names
// count as TimeZone.
func (q QuietHours) Until(t time.Time, zones []string) (time.Time, bool) {
	locs := make([]*time.Location, 0, len(zones)+1)
	for _, z := range zones {
		if l, err := time.LoadLocation(z); err == nil {
			locs = append(locs, l)
		}
	}
	if len(locs) == 0 {
		l, err := time.LoadLocation(q.TimeZone)
		if err != nil {
			return time.Time{}, false
		}
		locs = append(locs, l)
	}
	start, _ := clock(q.Start)
	end, _ := clock(q.End)
	inside := false
	// Each step moves t to the end of a window it is in; windows of
	// different zones may chain, a few steps at most.
	for range 2*len(locs) + 2 {
		moved := false
		for _, l := range locs {
			if e, in := window(t.In(l), start, end); in {
				t, moved, inside = e, true, true
			}
		}
		if !moved {
			break
		}
	}
	return t.UTC(), inside
}

// window reports whether local time t is inside [start, end) (minutes after
// midnight, end < start wrapping past midnight) and when that window ends.
func window(t time.Time, start, end int) (time.Time, bool) {
	min := t.Hour()*60 + t.Minute()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	at := func(d time.Time, m int) time.Time {
		return time.Date(d.Year(), d.Month(), d.Day(), m/60, m%60, 0, 0, t.Location())
	}
	switch {
	case start < end && min >= start && min < end:
		return at(day, end), true
	case start > end && min >= start:
		return at(day.AddDate(0, 0, 1), end), true
	case start > end && min < end:
		return at(day, end), true
	}
	return time.Time{}, false
}
