package api

import (
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/messages"
)

// sendMessage is POST /api/messages: decode, call the send path (package
// send), encode. commitID is the message id the request's Idempotency-Key
// claim names ("" without a key); the key layer stores the answer when it
// reached the send stage.
func (s *Server) sendMessage(c echo.Context, commitID string) (sendStage bool, err error) {
	if err := requireJSON(c); err != nil {
		return false, err
	}
	a, err := s.opts.Send.Send(c.Request().Context(), currentWorkspace(c), Body(c), commitID)
	if err != nil {
		return a.SendStage, err
	}
	if a.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(a.RetryAfter.Seconds())))))
	}
	return a.SendStage, writeJSON(c, answerStatus(c, a), echo.MIMEApplicationJSON, a.Body)
}

// getMessage is GET /api/messages/{id}: the workspace's own messages only.
func (s *Server) getMessage(c echo.Context) error {
	m, err := s.opts.Messages.GetForWorkspace(c.Request().Context(), WorkspaceID(c), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "message": m})
}

// deleteDedupLock is DELETE /api/dedup-locks/{lockId}: an operator frees a
// lock so the same text can be sent again at once.
func (s *Server) deleteDedupLock(c echo.Context) error {
	id := c.Param("lockId")
	if err := s.opts.Send.DeleteLock(c.Request().Context(), WorkspaceID(c), id); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "deleted": true, "lockId": id})
}

// cancelMessage is POST /api/messages/{id}/cancel: a scheduled message of
// the workspace becomes canceled, unless its time came first (409 with the
// message). Canceling a canceled message answers it again.
func (s *Server) cancelMessage(c echo.Context) error {
	m, err := s.opts.Send.Cancel(c.Request().Context(), currentWorkspace(c), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "status": m.Status, "message": m})
}

// cancelByKey is POST /api/messages/cancel {"cancellationKey": "…"}: every
// scheduled message given that key is canceled; the answer lists the
// canceled ones and those whose time came first.
func (s *Server) cancelByKey(c echo.Context) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	var in struct {
		CancellationKey string `json:"cancellationKey"`
	}
	if err := decodeStrict(Body(c), &in); err != nil {
		return err
	}
	if in.CancellationKey == "" || len(in.CancellationKey) > 255 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the request has invalid fields; see errors",
			Fields: []msgapi.FieldError{{Field: "cancellationKey", Message: "is required: at most 255 bytes"}}}
	}
	canceled, notCanceled, err := s.opts.Send.CancelByKey(c.Request().Context(), currentWorkspace(c), in.CancellationKey)
	if err != nil {
		return err
	}
	if canceled == nil {
		canceled = []messages.Message{}
	}
	if notCanceled == nil {
		notCanceled = []messages.Message{}
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "canceled": canceled, "notCanceled": notCanceled})
}
