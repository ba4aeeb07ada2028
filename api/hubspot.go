package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/hubspot"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/vendorsig"
)

// HubSpotActionPath is the HubSpot custom workflow action's actionUrl,
// under the workspace it sends for (deploy/hubspot/action.json).
const HubSpotActionPath = "/integrations/hubspot/:workspaceId/actions/send"

// hubspotVerify authenticates a HubSpot action call by its signature
// (vendorsig.HubSpot) with the workspace's "hubspot" secret, before
// anything is written; the workspace is then the request's, as an API
// key's would be.
func (s *Server) hubspotVerify(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ws, err := s.opts.Workspaces.Find(r.Context(), c.Param("workspaceId"))
		if err != nil {
			return err
		}
		if ws.Disabled {
			return msgapi.Errorf(msgapi.CodeUnauthorized, "this workspace is disabled")
		}
		secret, err := s.opts.Workspaces.Secret(ws, SecretHubSpot)
		if err != nil {
			return err
		}
		if secret == "" {
			return msgapi.Errorf(msgapi.CodeUnauthorized, "this workspace has no HubSpot app secret: PUT /admin/workspaces/%s/secrets/hubspot", ws.ID)
		}
		u := vendorsig.RequestURL(r, s.opts.PublicURL, s.opts.TrustedProxies)
		if reason := vendorsig.HubSpot(secret, r.Header, r.Method, u, Body(c), s.now()); reason != "" {
			logger(c).Warn().Str("event", events.HubSpotSignatureInvalid).Str("workspaceId", ws.ID).Str("reason", reason).Msg("hubspot action: signature refused")
			return msgapi.Errorf(msgapi.CodeUnauthorized, "the HubSpot signature is not valid: %s", reason)
		}
		c.Set(ctxWorkspace, ws)
		return next(c)
	}
}

// hubspotAction is POST /integrations/hubspot/{workspaceId}/actions/send:
// HubSpot's call becomes a POST /api/messages body (hubspot.Request.SendBody)
// sent through the Idempotency-Key layer with the key "hubspot:" +
// callbackId, which HubSpot keeps across its retries of one execution; the
// answer is outputFields. A definite outcome is SUCCESS or FAIL_CONTINUE at
// once; a duplicate whose original is still in flight is BLOCK, recorded
// before the answer so that the execution is completed through HubSpot's
// callback API once the original's outcome is known (hubspot.Callbacks).
//
// Statuses follow HubSpot's retry rules: 200 for every decided outcome
// (FAIL_CONTINUE included: the workflow branches on the outputs); 429 with
// Retry-After while the same execution's first call is still running, and
// for the workspace's rate limit (HubSpot retries 429, honouring
// Retry-After); 5xx when the store is unavailable (HubSpot retries 5xx);
// 401 for a bad signature.
func (s *Server) hubspotAction(c echo.Context) error {
	req, err := hubspot.ParseRequest(Body(c))
	if err != nil {
		return msgapi.Errorf(msgapi.CodeInvalid, "%s", err.Error())
	}
	send, err := req.SendBody()
	if err != nil {
		return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"outputFields": hubspot.Failure(string(msgapi.CodeInvalid), err.Error())})
	}
	ws := currentWorkspace(c)

	// The send runs in a context of its own, so that its answer can be read
	// and turned into outputFields.
	inner := c.Request().Clone(c.Request().Context())
	inner.Header = http.Header{}
	inner.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	inner.Header.Set(idempotency.Header, "hubspot:"+req.CallbackID)
	rec := &answerRecorder{header: http.Header{}}
	ic := s.echo.NewContext(inner, rec)
	ic.SetPath(c.Path())
	ic.Set(ctxWorkspace, ws)
	ic.Set(ctxBody, send)
	ic.Set(ctxRequestID, requestID(c))
	if err := s.keyed(s.sendMessage)(ic); err != nil {
		switch code := msgapi.ErrorCode(err); code {
		case msgapi.CodeInvalid, msgapi.CodeLeadNotFound, msgapi.CodeIdempotencyMismatch:
			// A refused input: retrying the same execution changes nothing.
			return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"outputFields": hubspot.Failure(string(code), clientDetail(err))})
		case msgapi.CodeIdempotencyInFlight:
			// This execution's first call is still sending: HubSpot retries
			// a 429 after Retry-After and then gets its answer replayed.
			return &msgapi.Error{Code: msgapi.CodeRateLimited, Message: "this execution's first call is still running; retry after 1 s", RetryAfter: time.Second}
		}
		return err
	}
	var a struct {
		Status        string `json:"status"`
		DuplicateOnly bool   `json:"duplicateOnly"`
		Pending       bool   `json:"pending"`
		Message       struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if rec.code/100 != 2 || json.Unmarshal(rec.body.Bytes(), &a) != nil {
		return msgapi.Unavailable(errHubSpotAnswer(rec.code))
	}
	ans := hubspot.Answer{MessageID: a.Message.ID, Status: a.Status, DuplicateOnly: a.DuplicateOnly, Pending: a.Pending}
	if ans.MessageID == "" && ans.Pending {
		// The original is in flight and its message not yet written: no
		// message to wait for. HubSpot retries a 429 after Retry-After; the
		// retry finds the original's message.
		ra := time.Second
		if s, err := strconv.Atoi(rec.header.Get("Retry-After")); err == nil && s > 0 {
			ra = time.Duration(s) * time.Second
		}
		return &msgapi.Error{Code: msgapi.CodeRateLimited, Message: "an identical message for this contact is still being sent; retry after it completes", RetryAfter: ra}
	}
	if hubspot.State(ans) == hubspot.StateBlock {
		if err := s.opts.HubSpot.Block(c.Request().Context(), ws.ID, req.CallbackID, a.Message.ID); err != nil {
			return err // 503: HubSpot retries, and gets the same pending answer
		}
	}
	if v := rec.header.Get(idempotency.ReplayedHeader); v != "" {
		c.Response().Header().Set(idempotency.ReplayedHeader, v)
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"outputFields": hubspot.Outputs(ans)})
}

type errHubSpotAnswer int

func (e errHubSpotAnswer) Error() string {
	return "hubspot action: the send path answered " + strconv.Itoa(int(e)) + " without an error"
}

// answerRecorder keeps the inner send's answer.
type answerRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *answerRecorder) Header() http.Header { return r.header }
func (r *answerRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *answerRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// clientDetail is an error's client-facing text: its message and the
// fields it names.
func clientDetail(err error) string {
	var e *msgapi.Error
	if !errors.As(err, &e) {
		return "the request was refused"
	}
	d := e.Message
	for _, f := range e.Fields {
		d += "; " + f.Field + ": " + f.Message
	}
	return d
}

// now is the server's clock (Options.Now, for tests).
func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}
