package send

import (
	"fmt"
	"net/http"
	"time"

	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/sender"
)

// The answers of POST /api/messages (SPEC: Response shapes). The send answer
// and the duplicate answer are also rebuilt from the store for an
// Idempotency-Key whose holder died (commit.go), by this same code.

// Every 2xx answer has one shape (SPEC: Callers): success, status,
// duplicateOnly, pending, message and the CRM keys, always present, so that
// an engine that builds its field picker from one sample (Zapier, Make)
// sees every field of every answer. status is the message's status; a
// duplicate's is its original's; a pending answer's is "pending" (never
// null: a workflow branching on status must not take its failure branch
// for a request that is only waiting).

// StatusPending is the status of the "still in flight" answer: no message
// of this request, and the original's is not known yet.
const StatusPending = "pending"

// SentAnswer is the answer to a send that ran: 201 (new lead) or 200.
type SentAnswer struct {
	Success       bool   `json:"success"`
	Status        string `json:"status"`
	DuplicateOnly bool   `json:"duplicateOnly"`
	Pending       bool   `json:"pending"`
	// Code is recipient_opted_out when the recipient opted out: the
	// message is suppressed, or the provider refused it for that reason.
	Code    string           `json:"code,omitempty"`
	Message messages.Message `json:"message"`
	crmKeys
}

// DuplicateAnswer is the answer when the guard caught a duplicate.
// Pending marks the "still in flight" answer (message null): not a
// finished request, to be retried.
type DuplicateAnswer struct {
	Success          bool              `json:"success"`
	Status           string            `json:"status"`
	DuplicateOnly    bool              `json:"duplicateOnly"`
	Pending          bool              `json:"pending"`
	OriginalAgeMs    *int64            `json:"originalAgeMs,omitempty"`
	DuplicateMessage string            `json:"duplicateMessage"`
	LockID           string            `json:"lockId"`
	Message          *messages.Message `json:"message"`
	crmKeys
}

// crmKeys are always present, null when unknown.
type crmKeys struct {
	LeadID        *string `json:"leadId"`
	GHLContactID  *string `json:"ghlContactId"`
	GHLLocationID *string `json:"ghlLocationId"`
	HSContactID   *string `json:"hsContactId"`
	HSPortalID    *string `json:"hsPortalId"`
}

func keysOf(leadID string, c messages.CRMRefs) crmKeys {
	return crmKeys{ptr(leadID), ptr(c.GHLContactID), ptr(c.GHLLocationID), ptr(c.HSContactID), ptr(c.HSPortalID)}
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// sentOf is the send answer for m, whose lead is leadID with crm.
func sentOf(m messages.Message, leadID string, crm messages.CRMRefs) SentAnswer {
	a := SentAnswer{Success: true, Status: m.Status, Message: m, crmKeys: keysOf(leadID, crm)}
	if m.ErrorCode == sender.CodeOptedOut {
		a.Code = sender.CodeOptedOut
	}
	return a
}

// duplicateOf is the duplicate answer naming the original message m.
func duplicateOf(m messages.Message, lockID string, age time.Duration) DuplicateAnswer {
	secs := int(max(age, 0).Round(time.Second) / time.Second)
	text := fmt.Sprintf("The same text was sent to this contact %d seconds ago; the existing message is returned and nothing was sent again.", secs)
	return DuplicateAnswer{
		Success: true, Status: m.Status, DuplicateOnly: true, DuplicateMessage: text, LockID: lockID,
		Message: &m, crmKeys: keysOf(m.LeadID, m.CRM),
	}
}

// pending is the "still in flight" answer: not a finished request.
// RetryAfter says when a retry will find the original (at least 1 s);
// originalAgeMs is how long the original has been in flight.
func pending(lockID string, retryAfter, age time.Duration) Answer {
	ms := age.Milliseconds()
	return Answer{Status: http.StatusOK, RetryAfter: max(retryAfter, time.Second), Pending: true, Body: DuplicateAnswer{
		Success: true, Status: StatusPending, DuplicateOnly: true, Pending: true, OriginalAgeMs: &ms, LockID: lockID,
		DuplicateMessage: "An identical request for this contact is still being processed; retry after it completes to get the original message.",
	}}
}

// refused reports whether a message in this status reached no one by a
// definite refusal: the answer a caller's refusedStatus applies to.
func refused(status string) bool {
	return status == messages.StatusFailed || status == messages.StatusSuppressed
}
