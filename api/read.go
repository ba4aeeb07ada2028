package api

import (
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
	"github.com/msgapi/msgapi/messages"
)

// The read API: lists of messages, leads and conversations. Every read is
// by _id (messages/index.go says why and what a page costs).

// listResponse is a page, Stripe-shaped: data newest first, hasMore, and
// the cursor of the next page (null on the last).
type listResponse struct {
	Success bool `json:"success"`
	messages.Page
}

var listParams = []string{"leadId", "conversationId", "direction", "status", "channel", "since", "until", "limit", "cursor"}

// listMessages is GET /api/messages.
func (s *Server) listMessages(c echo.Context) error {
	q, err := messages.ParseListQuery(c.QueryParams(), listParams...)
	if err != nil {
		return err
	}
	page, err := s.opts.Messages.List(c.Request().Context(), WorkspaceID(c), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, listResponse{Success: true, Page: page})
}

// getLead is GET /api/leads/{id}.
func (s *Server) getLead(c echo.Context) error {
	l, err := s.opts.Messages.GetLead(c.Request().Context(), WorkspaceID(c), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "lead": l})
}

// findLeads is GET /api/leads?phone=…|email=…: the lead of one contact,
// normalised exactly as a send normalises it, as a list of zero or one.
func (s *Server) findLeads(c echo.Context) error {
	var (
		q            = c.QueryParams()
		phone, email string
		errs         []msgapi.FieldError
	)
	for _, name := range slices.Sorted(maps.Keys(q)) {
		vals := q[name]
		switch {
		case name != "phone" && name != "email":
			errs = append(errs, msgapi.FieldError{Field: name, Message: "unknown parameter; this route takes phone or email"})
		case len(vals) != 1:
			errs = append(errs, msgapi.FieldError{Field: name, Message: "give it once"})
		case name == "phone":
			p, err := contact.NormalizePhone(vals[0], s.opts.Send.DefaultRegion())
			if err != nil {
				errs = append(errs, msgapi.FieldError{Field: name, Message: err.Error()})
			}
			phone = p
		default:
			e, err := contact.NormalizeEmail(vals[0])
			if err != nil {
				errs = append(errs, msgapi.FieldError{Field: name, Message: err.Error()})
			}
			email = e
		}
	}
	if len(errs) == 0 && (q.Has("phone") == q.Has("email")) {
		errs = append(errs, msgapi.FieldError{Field: "phone", Message: "give exactly one of phone and email"})
	}
	if len(errs) > 0 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the query has invalid parameters; see errors", Fields: errs}
	}
	l, found, err := s.opts.Messages.FindLead(c.Request().Context(), WorkspaceID(c), phone, email)
	if err != nil {
		return err
	}
	data := []messages.Lead{}
	if found {
		data = append(data, l)
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{
		"success": true, "data": data, "hasMore": false, "nextCursor": nil,
	})
}

// getConversation is GET /api/conversations/{id}: the conversation and a
// page of its messages (limit, cursor), the same page as
// GET /api/messages?conversationId={id} — their cursors are interchangeable.
func (s *Server) getConversation(c echo.Context) error {
	ctx := c.Request().Context()
	conv, err := s.opts.Messages.GetConversation(ctx, WorkspaceID(c), c.Param("id"))
	if err != nil {
		return err
	}
	// The path names the conversation; the page (and the cursor, which is
	// bound to its filters) is that of ?conversationId=.
	params := url.Values{}
	for k, v := range c.QueryParams() {
		if k == "conversationId" {
			k = "conversationId (in the query)" // only the path names it
		}
		params[k] = v
	}
	params.Set("conversationId", conv.ID)
	q, err := messages.ParseListQuery(params, "limit", "cursor", "conversationId")
	if err != nil {
		return err
	}
	page, err := s.opts.Messages.List(ctx, WorkspaceID(c), q)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{
		"success": true, "conversation": conv, "messages": page,
	})
}
