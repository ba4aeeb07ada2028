package main

import (
	"sort"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// legitimate is a history with every outcome the checker must accept: a
// duplicate answered with the original, a resend after a 4xx refusal, an
// ambiguous 5xx (unknown) delivered once, a timed-out call, keyed replays
// byte for byte, a pending answer that differs from the final one.
func legitimate() History {
	sentA := []byte(`{"success":true,"status":"sent","message":{"id":"m1","status":"sent"}}`)
	return History{
		Logical: []Logical{
			{ID: "a", Recipient: "+15550000001", Body: "text a"},
			{ID: "b", Recipient: "+15550000001", Body: "text b"},
			{ID: "c", Recipient: "+15550000002", Body: "text c", Key: "key-c"},
			{ID: "d", Recipient: "+15550000002", Body: "text d"},
		},
		Requests: []Request{
			{Logical: "a", Code: 200, Body: sentA, MessageID: "m1", Status: "sent", End: at(10)},
			{Logical: "a", Code: 200, Body: []byte(`{"duplicateOnly":true}`), MessageID: "m1", Status: "sent", End: at(20)},
			{Logical: "b", Code: 200, MessageID: "m2", Status: "failed", End: at(30)},
			{Logical: "b", Code: 200, MessageID: "m3", Status: "sent", End: at(40)},
			{Logical: "c", Key: "key-c", Code: 200, Pending: true, Body: []byte(`{"pending":true}`), End: at(45)},
			{Logical: "c", Key: "key-c", Code: 201, Body: []byte(`{"message":{"id":"m4","status":"unknown"}}`), MessageID: "m4", Status: "unknown", End: at(50)},
			{Logical: "c", Key: "key-c", Code: 409, End: at(55)},
			{Logical: "c", Key: "key-c", Code: 201, Body: []byte(`{"message":{"id":"m4","status":"unknown"}}`), MessageID: "m4", Status: "unknown", End: at(60)},
			{Logical: "d", Err: "context deadline exceeded", End: at(70)},
		},
		Deliveries: []Delivery{
			{MessageID: "m1", Recipient: "+15550000001", Body: "text a", Outcome: "ok", At: at(5)},
			{MessageID: "m2", Recipient: "+15550000001", Body: "text b", Outcome: "4xx", At: at(25)},
			{MessageID: "m3", Recipient: "+15550000001", Body: "text b", Outcome: "slow", At: at(35)},
			{MessageID: "m4", Recipient: "+15550000002", Body: "text c", Outcome: "5xx", At: at(48)},
			{MessageID: "m5", Recipient: "+15550000002", Body: "text d", Outcome: "hang", At: at(65)},
		},
		ReadBack: map[string]ReadBack{
			"m1": {Found: true, Status: "sent"}, "m2": {Found: true, Status: "failed"}, "m3": {Found: true, Status: "delivered"},
			"m4": {Found: true, Status: "unknown"}, "m5": {Found: true, Status: "unknown"},
		},
	}
}

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	sort.Strings(out)
	return out
}

func TestCheckAcceptsLegitimateOutcomes(t *testing.T) {
	vs, excused := Check(legitimate())
	if len(vs) != 0 || len(excused) != 0 {
		t.Errorf("violations %v, excused %v; want none", vs, excused)
	}
}

// Each case breaks one promise in the legitimate history; the checker must
// name exactly that violation.
func TestCheckFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(h *History)
		want   []string
	}{
		{"text sent twice", func(h *History) {
			h.Deliveries = append(h.Deliveries, Delivery{MessageID: "m9", Recipient: "+15550000001", Body: "text a", Outcome: "5xx", At: at(90)})
			h.ReadBack["m9"] = ReadBack{Found: true, Status: "unknown"}
		}, []string{VDoubleText}},
		{"a key sent twice, the first refused", func(h *History) {
			h.Deliveries[3].Outcome = "4xx"
			h.ReadBack["m4"] = ReadBack{Found: true, Status: "failed"}
			h.Deliveries = append(h.Deliveries, Delivery{MessageID: "m9", Recipient: "+15550000002", Body: "text c", Outcome: "ok", At: at(40000)})
			h.ReadBack["m9"] = ReadBack{Found: true, Status: "sent"}
		}, []string{VDoubleKey}},
		{"one message id twice", func(h *History) {
			h.Deliveries = append(h.Deliveries, Delivery{MessageID: "m2", Recipient: "+15550000009", Body: "other", Outcome: "4xx", At: at(95)})
		}, []string{VDoubleMessage}},
		{"answered sent, refused by the provider", func(h *History) {
			h.Requests[3].Status = "sent"
			h.Deliveries[2].Outcome = "5xx"
			h.ReadBack["m3"] = ReadBack{Found: true, Status: "unknown"}
		}, []string{VSentNotOnce}},
		{"answered sent, never delivered", func(h *History) {
			h.Deliveries = h.Deliveries[1:] // m1 never reached the provider
		}, []string{VSentNotOnce}},
		{"acknowledged, now 404", func(h *History) {
			h.ReadBack["m4"] = ReadBack{}
		}, []string{VLost}},
		{"left sending", func(h *History) {
			h.ReadBack["m5"] = ReadBack{Found: true, Status: "sending"}
		}, []string{VStuck}},
		{"accepted, says failed", func(h *History) {
			h.ReadBack["m3"] = ReadBack{Found: true, Status: "failed"}
		}, []string{VContradicts}},
		{"delivered without a message", func(h *History) {
			h.ReadBack["m5"] = ReadBack{}
		}, []string{VOrphan}},
		{"replay differs", func(h *History) {
			h.Requests[7].Body = []byte(`{"message":{"id":"m4","status":"sent"}}`)
		}, []string{VReplay}},
		{"replay with another status code", func(h *History) {
			h.Requests[7].Code = 200
		}, []string{VReplay}},
		{"bad signature", func(h *History) { h.BadSig = 2 }, []string{VBadSignature}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := legitimate()
			tc.break_(&h)
			vs, _ := Check(h)
			if got := strings.Join(kinds(vs), "; "); got != strings.Join(tc.want, "; ") {
				t.Errorf("violations %q, want %q (%v)", got, tc.want, vs)
			}
		})
	}
}

// With MSGAPI_DEDUP_ON_STORE_ERROR=send, a second send of a text is
// excused only when every call but one went out unguarded.
func TestCheckExcusesOnlyUnguardedDoubles(t *testing.T) {
	h := legitimate()
	h.Deliveries = append(h.Deliveries,
		Delivery{MessageID: "m9", Recipient: "+15550000001", Body: "text a", Outcome: "ok", At: at(90)},
		Delivery{MessageID: "m8", Recipient: "+15550000001", Body: "text a", Outcome: "ok", At: at(95)})
	h.ReadBack["m9"] = ReadBack{Found: true, Status: "sent"}
	h.ReadBack["m8"] = ReadBack{Found: true, Status: "sent"}

	h.Unguarded = map[string]bool{"m9": true, "m8": true}
	vs, excused := Check(h)
	if len(vs) != 0 || len(excused) != 1 {
		t.Errorf("two unguarded extras: violations %v, excused %v; want 0 and 1", vs, excused)
	}
	h.Unguarded = map[string]bool{"m9": true}
	vs, excused = Check(h)
	if got := kinds(vs); len(got) != 1 || got[0] != VDoubleText || len(excused) != 0 {
		t.Errorf("one guarded extra: violations %v, excused %v; want one %q", vs, excused, VDoubleText)
	}
}
