package api

import (
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/consent"
)

// The suppression list of a workspace (GET/POST /api/suppressions,
// GET/DELETE /api/suppressions/{address}) and the public one-click
// unsubscribe page of emails (GET/POST /unsubscribe/{token}). Package
// consent stores and decides.

// suppressionsPage is a page, shaped like the other lists.
type suppressionsPage struct {
	Success    bool                  `json:"success"`
	Data       []consent.Suppression `json:"data"`
	HasMore    bool                  `json:"hasMore"`
	NextCursor *string               `json:"nextCursor"`
}

func (s *Server) listSuppressions(c echo.Context) error {
	limit, cursor := 20, ""
	var bad []msgapi.FieldError
	for _, name := range slices.Sorted(maps.Keys(c.QueryParams())) {
		v := c.QueryParam(name)
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100 {
				bad = append(bad, msgapi.FieldError{Field: "limit", Message: "an integer from 1 to 100"})
			}
			limit = n
		case "cursor":
			cursor = v
		default:
			bad = append(bad, msgapi.FieldError{Field: name, Message: "unknown parameter; this route takes limit and cursor"})
		}
	}
	if len(bad) > 0 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the query is invalid", Fields: bad}
	}
	p, err := s.opts.Consent.List(c.Request().Context(), WorkspaceID(c), cursor, limit)
	if err != nil {
		return err
	}
	out := suppressionsPage{Success: true, Data: p.Suppressions, HasMore: p.NextCursor != ""}
	if p.NextCursor != "" {
		out.NextCursor = &p.NextCursor
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, out)
}

// suppressionInput is the body of POST /api/suppressions.
type suppressionInput struct {
	Address string `json:"address"`
	Reason  string `json:"reason"`
}

func (s *Server) createSuppression(c echo.Context) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	var in suppressionInput
	if err := decodeStrict(Body(c), &in); err != nil {
		return err
	}
	if len(in.Reason) > 500 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the request is invalid",
			Fields: []msgapi.FieldError{{Field: "reason", Message: "at most 500 bytes"}}}
	}
	addr, err := s.suppressionAddress(c, in.Address)
	if err != nil {
		return err
	}
	sp, created, err := s.opts.Consent.Suppress(c.Request().Context(), WorkspaceID(c), addr, consent.SourceAPI, consent.Evidence{Reason: in.Reason})
	if err != nil {
		return err
	}
	status := http.StatusOK // already suppressed: the existing record
	if created {
		status = http.StatusCreated
	}
	return writeJSON(c, status, echo.MIMEApplicationJSON, map[string]any{"success": true, "created": created, "suppression": sp})
}

func (s *Server) getSuppression(c echo.Context) error {
	addr, err := s.suppressionAddress(c, c.Param("address"))
	if err != nil {
		return err
	}
	sp, err := s.opts.Consent.Get(c.Request().Context(), WorkspaceID(c), addr)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "suppression": sp})
}

func (s *Server) deleteSuppression(c echo.Context) error {
	addr, err := s.suppressionAddress(c, c.Param("address"))
	if err != nil {
		return err
	}
	lifted, err := s.opts.Consent.Lift(c.Request().Context(), WorkspaceID(c), addr, consent.SourceAPI, consent.Evidence{})
	if err != nil {
		return err
	}
	if !lifted {
		return msgapi.Errorf(msgapi.CodeNotFound, "the address is not suppressed")
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"success": true, "deleted": true, "address": addr})
}

// suppressionAddress normalises an address exactly as a send does.
func (s *Server) suppressionAddress(c echo.Context, raw string) (string, error) {
	if u, err := url.PathUnescape(raw); err == nil { // %2B15550100000
		raw = u
	}
	addr, _, err := consent.Normalize(raw, currentWorkspace(c).DefaultRegion(s.opts.Send.DefaultRegion()))
	if err != nil {
		return "", &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the request is invalid",
			Fields: []msgapi.FieldError{{Field: "address", Message: "an E.164 phone number or an email address"}}}
	}
	return addr, nil
}

// UnsubscribePath is the route of the one-click unsubscribe URL of emails.
const UnsubscribePath = "/unsubscribe/"

var unsubscribePage = template.Must(template.New("u").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="robots" content="noindex"><title>Unsubscribe</title></head>
<body style="font-family:sans-serif;max-width:32em;margin:3em auto">
{{if .Done}}<h1>You are unsubscribed</h1><p>{{.Address}} will get no more email from this sender.</p>
{{else}}<h1>Unsubscribe</h1><p>Stop email to {{.Address}} from this sender?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button></form>{{end}}
</body></html>`))

// unsubscribeGet is GET /unsubscribe/{token}: a confirmation page that
// changes nothing (mail scanners follow links; RFC 8058 section 3.2 is why
// only a POST unsubscribes).
func (s *Server) unsubscribeGet(c echo.Context) error {
	_, addr, ok := s.opts.Unsubscribe.Open(c.Param("token"))
	if !ok {
		return msgapi.Errorf(msgapi.CodeNotFound, "no such page")
	}
	return s.unsubscribeHTML(c, addr, false)
}

// unsubscribePost is POST /unsubscribe/{token}: the one-click unsubscribe
// (the body is List-Unsubscribe=One-Click, RFC 8058; the form on the GET
// page sends the same). A token that does not open is 404 and writes
// nothing.
func (s *Server) unsubscribePost(c echo.Context) error {
	ws, addr, ok := s.opts.Unsubscribe.Open(c.Param("token"))
	if !ok {
		return msgapi.Errorf(msgapi.CodeNotFound, "no such page")
	}
	if _, _, err := s.opts.Consent.Suppress(c.Request().Context(), ws, addr, consent.SourceUnsubscribe, consent.Evidence{Channel: "email", Reason: "one-click unsubscribe"}); err != nil {
		return err
	}
	return s.unsubscribeHTML(c, addr, true)
}

func (s *Server) unsubscribeHTML(c echo.Context, addr string, done bool) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Referrer-Policy", "no-referrer")
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusOK)
	return unsubscribePage.Execute(c.Response(), struct {
		Address string
		Done    bool
	}{addr, done})
}
