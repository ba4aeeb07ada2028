package messages

// Message states and their allowed moves, in one place: the send path, the
// outcome sweeper and delivery receipts all ask Move before they write a
// status, so no package compares status strings of its own.
//
//	scheduled ──► sending | sent | failed | unknown  (its time came: the scheduler sent it)
//	    ├──► canceled                       (a caller canceled it first; final)
//	    └──► suppressed | failed             (opted out, or the workspace was disabled, before its time)
//	sending ──► sent ──► delivered ──► read
//	   │         │   └──► undelivered
//	   │         └──────► failed            (a carrier refusal after acceptance)
//	   ├──► failed                          (the provider refused: reached no one)
//	   └──► unknown ──► sent | delivered | undelivered | failed
//	                                        (a late answer settles an ambiguous one)
//	suppressed                              (the recipient opted out: never sent; final)
//	received                                (inbound; final)
//	tombstone                               (a fenced message id; never sent, never listed)
//
// Moves only go up in rank, so a late or repeated receipt never moves a
// message backwards.
const (
	// StatusScheduled: accepted with a sendAt in the future; the
	// scheduler sends it then, unless it is canceled first.
	StatusScheduled = "scheduled"
	// StatusCanceled: a scheduled message canceled before its time; it
	// reached no one. Final.
	StatusCanceled    = "canceled"
	StatusSending     = "sending"     // written, handed to the provider, no answer yet
	StatusSent        = "sent"        // the provider accepted it
	StatusFailed      = "failed"      // the provider or carrier definitively refused it
	StatusUnknown     = "unknown"     // timeout, transport error or lost outcome: it may have been delivered
	StatusDelivered   = "delivered"   // the carrier reported delivery
	StatusUndelivered = "undelivered" // the carrier reported it could not deliver
	StatusRead        = "read"        // the recipient read it (where the channel tells)
	StatusReceived    = "received"    // an inbound message
	// StatusSuppressed: the recipient is on the workspace's suppression
	// list; the message was written as the answer and never handed to a
	// provider. Final: nothing moves it.
	StatusSuppressed = "suppressed"
	// StatusTombstone marks a message id that was fenced before its message
	// was written: whoever declared the holder gone inserted this document
	// under the holder's id, so the holder's own insert fails and it never
	// sends. It is never answered or listed as a message.
	StatusTombstone = "tombstone"
)

// rank orders outbound states; a move must go up. sent and unknown share a
// rank only in the sense that unknown may become sent, never the reverse.
var rank = map[string]int{
	StatusScheduled:   0,
	StatusSending:     1,
	StatusUnknown:     2,
	StatusSent:        3,
	StatusFailed:      4,
	StatusDelivered:   4,
	StatusUndelivered: 4,
	StatusRead:        5,
}

// CanMove reports whether a message in state from may be moved to state to.
// Moving to the same state is not a move (receipts that repeat record
// nothing new).
func CanMove(from, to string) bool {
	if from == to {
		return false
	}
	switch from {
	case StatusScheduled:
		// The scheduler's outcomes, a cancel, or a refusal at its time.
		switch to {
		case StatusSending, StatusSent, StatusFailed, StatusUnknown, StatusCanceled, StatusSuppressed:
			return true
		}
		return false
	case StatusTombstone, StatusReceived, StatusRead, StatusSuppressed, StatusCanceled:
		return false
	case StatusFailed, StatusUndelivered:
		return false // final: nothing reached the person
	case StatusDelivered:
		return to == StatusRead
	}
	rf, okf := rank[from]
	rt, okt := rank[to]
	return okf && okt && rt > rf
}

// Final reports whether the request that wrote a message in this state is
// answered for good: the send path will not change it any more (receipts
// may still move sent and delivered on, and the scheduler moves a
// scheduled message on at its time; see Due).
func Final(status string) bool { return status != StatusSending }

// Due reports whether a message in this state still waits for its time or
// its provider: scheduled or sending.
func Due(status string) bool { return status == StatusScheduled || status == StatusSending }

// Reached reports whether a message in this state may have reached its
// recipient. Only a definitive refusal (failed, undelivered) and a tombstone
// did not; sending and unknown may have, so the duplicate guard blocks a
// resend of them.
func Reached(status string) bool {
	switch status {
	case StatusFailed, StatusTombstone, StatusUndelivered, StatusSuppressed, StatusCanceled:
		return false
	}
	return true
}

// outbound lists the states an outbound message can be in, for From.
var outbound = []string{StatusScheduled, StatusSending, StatusUnknown, StatusSent, StatusFailed, StatusDelivered, StatusUndelivered, StatusRead}

// From lists the states a message may move to state to from (CanMove), for
// a write that must not move a message backwards: the filter of the status
// update is "status in From(to)".
func From(to string) []string {
	var out []string
	for _, s := range outbound {
		if CanMove(s, to) {
			out = append(out, s)
		}
	}
	return out
}

// Rank orders outbound states for receipts that arrive out of order: the
// highest-ranked state recorded for a message is its status. Unknown
// states rank 0.
func Rank(status string) int { return rank[status] }
