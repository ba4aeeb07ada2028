package main

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/msgapi/msgapi/messages"
)

// Logical is one text a CRM workflow wants sent once: one recipient, one
// body, carried by any number of requests (callers, retries), all with Key
// or all without one.
type Logical struct {
	ID        string
	Recipient string
	Body      string
	Key       string // Idempotency-Key of every request, or ""
}

// Request is one POST /api/messages as the client saw it.
type Request struct {
	Logical    string
	Key        string
	Proc       int
	Start, End time.Time
	Code       int    // HTTP status; 0 when no answer came (transport error, client timeout)
	Err        string // why there was no answer
	Body       []byte // the answer's bytes
	Pending    bool   // the "still in flight" answer: to be retried
	MessageID  string // the message the answer names, if any
	Status     string // that message's status in the answer
}

// answered is a finished 2xx answer that names a message: the ones an
// Idempotency-Key replays and a caller acts on.
func (r Request) answered() bool {
	return r.Code >= 200 && r.Code < 300 && !r.Pending && r.MessageID != ""
}

// Delivery is one provider call that reached the receiver.
type Delivery struct {
	MessageID, Workspace, Recipient, Body string
	// Outcome is what the receiver did with it: ok (2xx), slow (2xx, late
	// but within the send timeout), hang (answered only after the send
	// timeout: msgapi saw a timeout), 5xx, 4xx (refused: reached no one).
	Outcome string
	At      time.Time
}

// mayHaveReached: every call but a 4xx refusal may have reached the person
// (a 5xx or a timeout is ambiguous, and counted as delivered).
func (d Delivery) mayHaveReached() bool { return d.Outcome != "4xx" }

// accepted: the receiver answered 2xx — in time, or (hang) after the send
// timeout, which msgapi may still read as accepted when its own process was
// stalled (SIGSTOP, a starved CPU) past its timer.
func (d Delivery) accepted() bool {
	return d.Outcome == "ok" || d.Outcome == "slow" || d.Outcome == "hang"
}

// ReadBack is GET /api/messages/{id} after the quiet period.
type ReadBack struct {
	Found  bool
	Status string
	Err    string // the read itself failed
}

// History is everything one run recorded.
type History struct {
	Logical    []Logical
	Requests   []Request
	Deliveries []Delivery
	ReadBack   map[string]ReadBack // message id → its state at the end
	// Unguarded are the messages their process sent without duplicate
	// protection because the lock could not be written
	// (message.api.duplicate_guard_error, MSGAPI_DEDUP_ON_STORE_ERROR=send).
	Unguarded map[string]bool
	BadSig    int // deliveries refused for a bad or missing signature
}

// Violation is one broken promise.
type Violation struct {
	Kind, Detail string
}

// Excused is a second send the README documents as a trade-off: with
// MSGAPI_DEDUP_ON_STORE_ERROR=send, a request whose lock cannot be written
// is sent without duplicate protection.
const Excused = "unguarded double send (documented for MSGAPI_DEDUP_ON_STORE_ERROR=send)"

// The kinds of violation, in the order the table prints them.
const (
	VDoubleText    = "text sent twice in its window"
	VDoubleKey     = "Idempotency-Key sent twice"
	VDoubleMessage = "one message id sent twice"
	VSentNotOnce   = "answered sent, not delivered exactly once"
	VLost          = "acknowledged message lost"
	VStuck         = "message not final"
	VContradicts   = "status contradicts the provider"
	VOrphan        = "delivered without a message"
	VReplay        = "Idempotency-Key replay differs"
	VBadSignature  = "delivery with a bad signature"
)

var violationKinds = []string{VDoubleText, VDoubleKey, VDoubleMessage, VSentNotOnce, VLost, VStuck, VContradicts, VOrphan, VReplay, VBadSignature}

// Check judges a history. See the package comment for the definitions.
func Check(h History) (vs []Violation, excused []Violation) {
	add := func(kind, format string, args ...any) {
		vs = append(vs, Violation{kind, fmt.Sprintf(format, args...)})
	}
	logical := map[string]Logical{}
	byText := map[string]string{} // recipient + body → logical id
	for _, l := range h.Logical {
		logical[l.ID] = l
		byText[l.Recipient+"\x00"+l.Body] = l.ID
	}
	perText := map[string][]Delivery{}
	perMessage := map[string][]Delivery{}
	for _, d := range h.Deliveries {
		perMessage[d.MessageID] = append(perMessage[d.MessageID], d)
		if id, ok := byText[d.Recipient+"\x00"+d.Body]; ok {
			perText[id] = append(perText[id], d)
		}
	}

	// One text, one send: per logical message (every request of which
	// falls within the window of its first, by construction of the run),
	// at most one provider call that may have reached the person; under an
	// Idempotency-Key, at most one provider call at all, ever.
	for _, id := range sortedKeys(perText) {
		ds := perText[id]
		sort.Slice(ds, func(i, j int) bool { return ds[i].At.Before(ds[j].At) })
		var reached []Delivery
		for _, d := range ds {
			if d.mayHaveReached() {
				reached = append(reached, d)
			}
		}
		switch l := logical[id]; {
		case l.Key != "" && len(ds) > 1:
			add(VDoubleKey, "%s (key %s): %d provider calls (%s)", id, l.Key, len(ds), describe(ds))
		case l.Key == "" && len(reached) > 1 && guarded(h, reached) <= 1:
			excused = append(excused, Violation{Excused, fmt.Sprintf("%s: %d calls (%s), all but %d unguarded", id, len(reached), describe(reached), guarded(h, reached))})
		case l.Key == "" && len(reached) > 1:
			add(VDoubleText, "%s: %d calls that may have reached the person (%s)", id, len(reached), describe(reached))
		}
	}
	// A message is handed to its provider once.
	for _, id := range sortedKeys(perMessage) {
		if ds := perMessage[id]; len(ds) > 1 {
			add(VDoubleMessage, "%s: %d calls (%s)", id, len(ds), describe(ds))
		}
	}

	// Nothing acknowledged is lost; replays are the first answer.
	firstByKey := map[string]Request{}
	named, sentChecked := map[string]bool{}, map[string]bool{}
	reqs := append([]Request(nil), h.Requests...)
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].End.Before(reqs[j].End) })
	for _, r := range reqs {
		if !r.answered() {
			continue
		}
		named[r.MessageID] = true
		if r.Status == messages.StatusSent && !sentChecked[r.MessageID] {
			sentChecked[r.MessageID] = true
			ok, all := 0, len(perMessage[r.MessageID])
			for _, d := range perMessage[r.MessageID] {
				if d.accepted() {
					ok++
				}
			}
			if ok != 1 || all != 1 {
				add(VSentNotOnce, "%s: answered sent (%s, proc %d), %d accepted of %d calls (%s)", r.MessageID, r.Logical, r.Proc, ok, all, describe(perMessage[r.MessageID]))
			}
		}
		if r.Key == "" {
			continue
		}
		first, seen := firstByKey[r.Key]
		if !seen {
			firstByKey[r.Key] = r
			continue
		}
		if first.Code != r.Code || !bytes.Equal(first.Body, r.Body) {
			add(VReplay, "key %s: %d %q, then %d %q", r.Key, first.Code, clip(first.Body), r.Code, clip(r.Body))
		}
	}

	// Every message ends final, exists if it was acknowledged or handed to
	// the provider, and does not contradict what the provider answered.
	ids := map[string]bool{}
	for id := range named {
		ids[id] = true
	}
	for id := range perMessage {
		ids[id] = true
	}
	for _, id := range sortedKeys(ids) {
		rb, ok := h.ReadBack[id]
		switch {
		case !ok || rb.Err != "":
			add(VLost, "%s: not read back (%s)", id, rb.Err)
			continue
		case !rb.Found && named[id]:
			add(VLost, "%s: answered to a caller, now 404", id)
			continue
		case !rb.Found:
			add(VOrphan, "%s: %d provider call(s), no message", id, len(perMessage[id]))
			continue
		case !messages.Final(rb.Status):
			add(VStuck, "%s: %s after the quiet period; provider calls: %s", id, rb.Status, describe(perMessage[id]))
		}
		for _, d := range perMessage[id] {
			if d.accepted() && !messages.Reached(rb.Status) {
				add(VContradicts, "%s: the provider accepted it, the message says %s", id, rb.Status)
			}
		}
	}
	if h.BadSig > 0 {
		add(VBadSignature, "%d provider call(s) refused for their signature", h.BadSig)
	}
	return vs, excused
}

// guarded counts the calls whose message went through the duplicate guard.
func guarded(h History, ds []Delivery) int {
	n := 0
	for _, d := range ds {
		if !h.Unguarded[d.MessageID] {
			n++
		}
	}
	return n
}

func describe(ds []Delivery) string {
	if len(ds) == 0 {
		return "none"
	}
	var b bytes.Buffer
	t0 := ds[0].At
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s +%s", d.MessageID, d.Outcome, d.At.Sub(t0).Round(time.Millisecond))
	}
	return b.String()
}

func clip(b []byte) string {
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
