package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/notify"
)

// Event webhooks: a workspace's endpoints (POST/GET/DELETE
// /api/webhook-endpoints) and its events (GET /api/events, GET
// /api/events/{id}, POST /api/events/{id}/redeliver). Package notify
// stores and delivers them.

func (s *Server) createEndpoint(c echo.Context) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	var in notify.EndpointInput
	if err := decodeStrict(Body(c), &in); err != nil {
		return err
	}
	ep, err := s.opts.Outbox.CreateEndpoint(c.Request().Context(), WorkspaceID(c), in)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, echo.MIMEApplicationJSON, map[string]any{"success": true, "endpoint": notify.EndpointView(ep)})
}

func (s *Server) listEndpoints(c echo.Context) error {
	eps, err := s.opts.Outbox.ListEndpoints(c.Request().Context(), WorkspaceID(c))
	if err != nil {
		return err
	}
	out := make([]notify.EndpointJSON, len(eps))
	for i, ep := range eps {
		out[i] = notify.EndpointView(ep)
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "endpoints": out})
}

func (s *Server) deleteEndpoint(c echo.Context) error {
	id := c.Param("id")
	if err := s.opts.Outbox.DeleteEndpoint(c.Request().Context(), WorkspaceID(c), id); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "deleted": true, "id": id})
}

func (s *Server) listEvents(c echo.Context) error {
	q := notify.ListQuery{Type: c.QueryParam("type"), Cursor: c.QueryParam("cursor"), Limit: 20}
	var fields []msgapi.FieldError
	if q.Type != "" && !knownEventType(q.Type) {
		fields = append(fields, msgapi.FieldError{Field: "type", Message: "unknown event type"})
	}
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			fields = append(fields, msgapi.FieldError{Field: "since", Message: "an RFC 3339 time, e.g. 2026-01-02T15:04:05Z"})
		}
		q.Since = t
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			fields = append(fields, msgapi.FieldError{Field: "limit", Message: "an integer from 1 to 100"})
		}
		q.Limit = n
	}
	if len(fields) > 0 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the query is invalid", Fields: fields}
	}
	p, err := s.opts.Outbox.ListEvents(c.Request().Context(), WorkspaceID(c), q)
	if err != nil {
		return err
	}
	var next *string
	if p.NextCursor != "" {
		next = &p.NextCursor
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "events": p.Events, "nextCursor": next, "hasMore": next != nil})
}

func (s *Server) getEvent(c echo.Context) error {
	e, err := s.opts.Outbox.GetEvent(c.Request().Context(), WorkspaceID(c), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "event": e})
}

func (s *Server) redeliverEvent(c echo.Context) error {
	id := c.Param("id")
	eps, err := s.opts.Outbox.Redeliver(c.Request().Context(), WorkspaceID(c), id)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusAccepted, echo.MIMEApplicationJSON, map[string]any{"success": true, "eventId": id, "endpointIds": eps})
}

func knownEventType(t string) bool {
	for _, k := range notify.Types {
		if k == t {
			return true
		}
	}
	return false
}

// decodeStrict decodes one JSON object, refusing unknown fields (a typo in
// a field name must not pass silently).
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return msgapi.Errorf(msgapi.CodeInvalid, "the body must be one JSON object with the documented fields")
	}
	return nil
}
