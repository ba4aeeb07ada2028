// Package msgapi holds the vocabulary every other package shares: the domain
// error type and its codes. Packages translate driver and library errors into
// an *Error at their own boundary; the api package maps each Code to an HTTP
// status and an RFC 9457 problem document in one table.
package msgapi

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable, machine-readable error code. Clients branch on it, so a
// code never changes meaning once published.
type Code string

// The codes, one per way a request can fail.
const (
	CodeInvalid             Code = "invalid_request"        // 400
	CodeUnauthorized        Code = "unauthorized"           // 401
	CodeNotFound            Code = "not_found"              // 404
	CodeLeadNotFound        Code = "lead_not_found"         // 404
	CodeMethodNotAllowed    Code = "method_not_allowed"     // 405
	CodeIdempotencyInFlight Code = "idempotency_key_in_use" // 409
	CodeNotCancelable       Code = "message_not_cancelable" // 409
	CodeTooLarge            Code = "request_too_large"      // 413
	CodeUnsupportedMedia    Code = "unsupported_media_type" // 415
	CodeIdempotencyMismatch Code = "idempotency_key_reused" // 422
	CodeRateLimited         Code = "rate_limited"           // 429
	CodeQuietHours          Code = "quiet_hours"            // 429, or the answer profile's refusedStatus
	CodeUnavailable         Code = "store_unavailable"      // 503
	CodeInternal            Code = "internal_error"         // 500
)

// FieldError names one invalid request field. Field is a JSON path such as
// "recipientPhone" or "attachments[2].url".
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is the domain error. Message is safe to show to the client; wrap the
// detail that is not in Err, which is logged but never shown.
type Error struct {
	Code       Code
	Message    string
	Fields     []FieldError  // validation failures, all at once
	RetryAfter time.Duration // 409 and 429: when to try again
	// Doc, optional, is the document the error is about, answered as the
	// problem's "message" member (the message a cancel could not cancel).
	Doc any
	Err error // underlying cause, for the log only
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted client-facing message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unavailable wraps a store failure: the client sees 503, the log sees err.
func Unavailable(err error) *Error {
	return &Error{Code: CodeUnavailable, Message: "the message store is unavailable; retry later", Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
