package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
)

// problemTypes is the one table from error code to HTTP status and title.
var problemTypes = map[msgapi.Code]struct {
	status int
	title  string
}{
	msgapi.CodeInvalid:             {http.StatusBadRequest, "Invalid request"},
	msgapi.CodeUnauthorized:        {http.StatusUnauthorized, "Unauthorized"},
	msgapi.CodeNotFound:            {http.StatusNotFound, "Not found"},
	msgapi.CodeLeadNotFound:        {http.StatusNotFound, "Lead not found"},
	msgapi.CodeMethodNotAllowed:    {http.StatusMethodNotAllowed, "Method not allowed"},
	msgapi.CodeIdempotencyInFlight: {http.StatusConflict, "Idempotency key in use"},
	msgapi.CodeNotCancelable:       {http.StatusConflict, "Message not cancelable"},
	msgapi.CodeTooLarge:            {http.StatusRequestEntityTooLarge, "Request too large"},
	msgapi.CodeUnsupportedMedia:    {http.StatusUnsupportedMediaType, "Unsupported media type"},
	msgapi.CodeIdempotencyMismatch: {http.StatusUnprocessableEntity, "Idempotency key reused"},
	msgapi.CodeRateLimited:         {http.StatusTooManyRequests, "Too many requests"},
	msgapi.CodeQuietHours:          {http.StatusTooManyRequests, "Quiet hours"},
	msgapi.CodeUnavailable:         {http.StatusServiceUnavailable, "Service unavailable"},
	msgapi.CodeInternal:            {http.StatusInternalServerError, "Internal error"},
}

// Problem is an RFC 9457 problem document with msgapi's extension members.
type Problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail"`
	Instance  string              `json:"instance,omitempty"`
	Success   bool                `json:"success"`
	Code      msgapi.Code         `json:"code"`
	Errors    []msgapi.FieldError `json:"errors,omitempty"`
	RequestID string              `json:"requestId,omitempty"`
	// Message is the message a refused cancel is about.
	Message any `json:"message,omitempty"`
}

// problemFor translates any error into a problem document. Errors that are
// not *msgapi.Error are internal: the client sees only "internal error".
func problemFor(err error, requestID, path string) (Problem, *msgapi.Error) {
	var e *msgapi.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &he):
		e = fromEcho(he)
	default:
		e = &msgapi.Error{Code: msgapi.CodeInternal, Message: "internal error", Err: err}
	}
	pt, ok := problemTypes[e.Code]
	if !ok {
		pt = problemTypes[msgapi.CodeInternal]
	}
	detail := e.Message
	if e.Code == msgapi.CodeInternal {
		detail = "internal error"
	}
	return Problem{
		Type:      "/docs#error-" + string(e.Code),
		Title:     pt.title,
		Status:    pt.status,
		Detail:    detail,
		Instance:  path,
		Success:   false,
		Code:      e.Code,
		Errors:    e.Fields,
		RequestID: requestID,
		Message:   e.Doc,
	}, e
}

func fromEcho(he *echo.HTTPError) *msgapi.Error {
	msg := http.StatusText(he.Code)
	if s, ok := he.Message.(string); ok && s != "" {
		msg = s
	}
	code := msgapi.CodeInternal
	switch he.Code {
	case http.StatusNotFound:
		code, msg = msgapi.CodeNotFound, "no such route"
	case http.StatusMethodNotAllowed:
		code, msg = msgapi.CodeMethodNotAllowed, "method not allowed on this route"
	case http.StatusRequestEntityTooLarge:
		code, msg = msgapi.CodeTooLarge, "the request body is larger than 1 MiB"
	case http.StatusUnsupportedMediaType:
		code = msgapi.CodeUnsupportedMedia
	case http.StatusBadRequest:
		code = msgapi.CodeInvalid
	case http.StatusUnauthorized:
		code = msgapi.CodeUnauthorized
	case http.StatusTooManyRequests:
		code = msgapi.CodeRateLimited
	case http.StatusServiceUnavailable:
		code = msgapi.CodeUnavailable
	}
	return &msgapi.Error{Code: code, Message: msg, Err: he.Internal}
}

// errorHandler is echo's HTTPErrorHandler: the one place errors become
// responses. The detail of an internal error is logged once, here.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if clientGone(c, err) {
		// The caller hung up: nobody reads an answer. Not a server error:
		// the access log and metrics record nginx's 499, at info level.
		c.Response().Status = StatusClientClosed
		logger(c).Info().Err(err).Msg("client closed the request")
		return
	}
	p, e := problemFor(err, requestID(c), c.Request().URL.Path)
	if s.opts.PublicURL != "" {
		p.Type = strings.TrimRight(s.opts.PublicURL, "/") + p.Type
	}
	if p.Code == msgapi.CodeIdempotencyInFlight {
		p.Status = inFlightStatus(c)
	}
	if r := requestProfile(c).Refused; p.Code == msgapi.CodeQuietHours && r >= 300 {
		p.Status = r // the caller's status for "this did not go out"
	}
	l := logger(c).With().Str("workspaceId", WorkspaceID(c)).Logger()
	log := &l
	if p.Status >= 500 {
		log.Error().Err(err).Str("code", string(p.Code)).Msg("request failed")
	} else if e.Err != nil {
		log.Debug().Err(e.Err).Str("code", string(p.Code)).Msg("request refused")
	}
	if e.RetryAfter > 0 {
		secs := int(e.RetryAfter.Seconds() + 0.999)
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	}
	// Bearer routes say how to authenticate; vendor webhooks are signed, not bearer.
	if p.Code == msgapi.CodeUnauthorized && !strings.HasPrefix(c.Request().URL.Path, "/api/webhooks/") && !strings.HasPrefix(c.Request().URL.Path, "/api/receipts/") {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="msgapi"`)
	}
	writeJSON(c, p.Status, "application/problem+json", p)
}

// StatusClientClosed is nginx's 499: the client closed the connection
// before the answer. It is never sent, only logged and counted.
const StatusClientClosed = 499

// clientGone reports whether err comes from the caller hanging up.
func clientGone(c echo.Context, err error) bool {
	return errors.Is(c.Request().Context().Err(), context.Canceled) &&
		(errors.Is(err, context.Canceled) || msgapi.ErrorCode(err) == msgapi.CodeUnavailable)
}
