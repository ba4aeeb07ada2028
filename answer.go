package msgapi

import "time"

// Answer is the answer to a send request (package send), as package api
// encodes it: the HTTP status and the JSON document. It lives here, with
// the error vocabulary, so that the HTTP layer reads it without depending
// on the send path's internals (the duplicate guard).
type Answer struct {
	Status int
	Body   any // a JSON document
	// RetryAfter is set on a pending answer: when a retry will find the
	// original (at least 1 s).
	RetryAfter time.Duration
	// SendStage says the request reached the send stage: its message (or
	// its duplicate decision) is committed, so an Idempotency-Key stores
	// this answer and a retry never runs the request again.
	SendStage bool
	// Pending marks the "still in flight" answer, Refused an answer whose
	// message reached no one by a definite refusal (failed, suppressed):
	// the HTTP layer picks their status from the caller's answer profile.
	Pending, Refused bool
}
