package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
	"github.com/msgapi/msgapi/ratelimit"
)

// Settings are a workspace's own values for settings that otherwise come
// from the server's configuration. A nil (or empty) field means the global
// value. They live on the workspace document and are cached with its API
// keys, so reading them costs the hot path nothing.
type Settings struct {
	DedupWindow   *time.Duration   `bson:"dedupWindow,omitempty"`
	DedupWait     *time.Duration   `bson:"dedupWait,omitempty"`
	RateLimit     *ratelimit.Limit `bson:"rateLimit,omitempty"`
	DefaultRegion string           `bson:"defaultRegion,omitempty"`
	// OptOutReply is the one confirmation text sent back to an inbound
	// STOP through the channel's sender; empty sends none (the provider
	// replies itself, as Twilio does on its numbers).
	OptOutReply string `bson:"optOutReply,omitempty"`
	// The answer profile (answers.go): explicit statuses over a preset.
	PendingStatus int    `bson:"pendingStatus,omitempty"`
	RefusedStatus int    `bson:"refusedStatus,omitempty"`
	AnswerProfile string `bson:"answerProfile,omitempty"`
	// QuietHours, when set, holds sends back in the recipient's night
	// (quiet.go).
	QuietHours *QuietHours `bson:"quietHours,omitempty"`
}

// MaxOptOutReply bounds the confirmation text: two SMS segments.
const MaxOptOutReply = 306

// The bounds of per-workspace settings. The window is at least a minute (a
// workflow's fast retries) and at most a day (locks are kept that long); a
// duplicate waits at most 10 s for its original (a connection held longer
// than that looks hung to most callers).
const (
	MinDedupWindow = time.Minute
	MaxDedupWindow = 24 * time.Hour
	MaxDedupWait   = 10 * time.Second
	MaxRate        = 1000
	MaxBurst       = 10000
)

// DedupWindow is the workspace's duplicate-guard window, or global.
func (w Workspace) DedupWindow(global time.Duration) time.Duration {
	if w.Settings.DedupWindow != nil {
		return *w.Settings.DedupWindow
	}
	return global
}

// DedupWait is how long a duplicate waits for its original in this
// workspace, or global. Zero is a valid workspace value (do not wait).
func (w Workspace) DedupWait(global time.Duration) time.Duration {
	if w.Settings.DedupWait != nil {
		return *w.Settings.DedupWait
	}
	return global
}

// DefaultRegion is the region for phone numbers without a country code in
// this workspace, or global.
func (w Workspace) DefaultRegion(global string) string {
	if w.Settings.DefaultRegion != "" {
		return w.Settings.DefaultRegion
	}
	return global
}

// RateLimit is the workspace's limit on POST /api/messages, or global.
func (w Workspace) RateLimit(global ratelimit.Limit) ratelimit.Limit {
	if w.Settings.RateLimit != nil {
		return *w.Settings.RateLimit
	}
	return global
}

// SettingsPatch is a validated change of settings: each member of the
// PATCH body either sets a field or (null) returns it to the global value.
type SettingsPatch struct {
	set, unset bson.D
}

// Empty reports whether the patch changes nothing.
func (p SettingsPatch) Empty() bool { return len(p.set) == 0 && len(p.unset) == 0 }

func (p SettingsPatch) update() bson.D {
	var u bson.D
	if len(p.set) > 0 {
		u = append(u, bson.E{Key: "$set", Value: p.set})
	}
	if len(p.unset) > 0 {
		u = append(u, bson.E{Key: "$unset", Value: p.unset})
	}
	return u
}

// ParseSettingsPatch reads a JSON merge patch of settings:
//
//	{"dedupWindow": "30m", "dedupWait": "0s", "rateLimit": {"perSecond": 5, "burst": 10},
//	 "defaultRegion": "GB"}
//
// A member that is absent is left alone; null returns it to the global
// value. Unknown members are refused (a misspelt setting must not be
// silently ignored), and every invalid member is reported at once.
func ParseSettingsPatch(body []byte) (SettingsPatch, error) {
	var in map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil || in == nil || dec.More() {
		return SettingsPatch{}, msgapi.Errorf(msgapi.CodeInvalid, `the body must be a JSON object such as {"dedupWindow": "30m"}`)
	}
	var p SettingsPatch
	var bad []msgapi.FieldError
	fail := func(field, msg string) { bad = append(bad, msgapi.FieldError{Field: field, Message: msg}) }
	for name, raw := range in {
		if string(raw) == "null" {
			if _, ok := settingFields[name]; ok {
				p.unset = append(p.unset, bson.E{Key: "settings." + name, Value: ""})
				continue
			}
		}
		switch name {
		case "dedupWindow":
			d, err := duration(raw, MinDedupWindow, MaxDedupWindow)
			if err != "" {
				fail(name, err)
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.dedupWindow", Value: d})
		case "dedupWait":
			d, err := duration(raw, 0, MaxDedupWait)
			if err != "" {
				fail(name, err)
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.dedupWait", Value: d})
		case "rateLimit":
			var l struct {
				PerSecond *int `json:"perSecond"`
				Burst     *int `json:"burst"`
			}
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if d.Decode(&l) != nil || l.PerSecond == nil || l.Burst == nil ||
				*l.PerSecond < 1 || *l.PerSecond > MaxRate || *l.Burst < 1 || *l.Burst > MaxBurst {
				fail(name, fmt.Sprintf(`an object {"perSecond": 1–%d, "burst": 1–%d}, or null for the server's default`, MaxRate, MaxBurst))
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.rateLimit", Value: ratelimit.Limit{PerSecond: *l.PerSecond, Burst: *l.Burst}})
		case "defaultRegion":
			var s string
			r, ok := "", false
			if json.Unmarshal(raw, &s) == nil {
				r, ok = contact.Region(s)
			}
			if !ok {
				fail(name, `a two-letter region with phone numbering, such as "US" or "GB", or null for the server's default`)
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.defaultRegion", Value: r})
		case "optOutReply":
			var t string
			if json.Unmarshal(raw, &t) != nil || strings.TrimSpace(t) == "" || len([]rune(t)) > MaxOptOutReply ||
				strings.ContainsFunc(t, func(r rune) bool { return r < ' ' && r != '\n' || r == 0x7f }) {
				fail(name, fmt.Sprintf("a text of 1 to %d characters, or null to send none", MaxOptOutReply))
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.optOutReply", Value: t})
		case "pendingStatus", "refusedStatus":
			allowed := PendingStatuses
			if name == "refusedStatus" {
				allowed = RefusedStatuses
			}
			var n int
			if json.Unmarshal(raw, &n) != nil || !slices.Contains(allowed, n) {
				fail(name, fmt.Sprintf("one of %v, or null for the server's default", allowed))
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings." + name, Value: n})
		case "answerProfile":
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = "\x00"
			}
			if _, ok := Presets[s]; !ok {
				fail(name, "one of "+presetList()+", or null for the server's default")
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.answerProfile", Value: s})
		case "quietHours":
			q, err := parseQuietHours(raw)
			if err != "" {
				fail(name, err)
				continue
			}
			p.set = append(p.set, bson.E{Key: "settings.quietHours", Value: q})
		default:
			fail(name, "unknown setting (dedupWindow, dedupWait, rateLimit, defaultRegion, optOutReply, pendingStatus, refusedStatus, answerProfile, quietHours)")
		}
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b msgapi.FieldError) int { return strings.Compare(a.Field, b.Field) })
		return SettingsPatch{}, &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the settings are invalid; see errors", Fields: bad}
	}
	return p, nil
}

var settingFields = map[string]struct{}{"dedupWindow": {}, "dedupWait": {}, "rateLimit": {}, "defaultRegion": {}, "optOutReply": {},
	"pendingStatus": {}, "refusedStatus": {}, "answerProfile": {}, "quietHours": {}}

// duration parses a JSON string such as "15m" within [lo, hi].
func duration(raw json.RawMessage, lo, hi time.Duration) (time.Duration, string) {
	msg := fmt.Sprintf(`a duration from %s to %s such as "%s", or null for the server's default`, FormatDuration(lo), FormatDuration(hi), FormatDuration(hi/2))
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, msg
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < lo || d > hi {
		return 0, msg
	}
	return d, ""
}

// FormatDuration writes d in the largest whole unit: "15m", "3s", "1500ms".
func FormatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}
