package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/stdwebhook"
)

// createWorkspace: POST /admin/workspaces {"name": "..."} → 201 with the
// workspace id and its first API key, shown this once.
func (s *Server) createWorkspace(c echo.Context) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	var in struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(Body(c), &in); err != nil {
		return msgapi.Errorf(msgapi.CodeInvalid, "the body must be a JSON object like {\"name\": \"Acme\"}")
	}
	ws, key, err := s.opts.Workspaces.Create(c.Request().Context(), in.Name)
	if err != nil {
		return err
	}
	logger(c).Info().Str("event", "workspace.created").Str("workspaceId", ws.ID).Msg("workspace created")
	return writeJSON(c, http.StatusCreated, echo.MIMEApplicationJSON, map[string]string{
		"workspaceId": ws.ID, "name": ws.Name, "apiKey": key,
	})
}

// createKey: POST /admin/workspaces/{id}/keys → 201 {"apiKey": "..."}.
func (s *Server) createKey(c echo.Context) error {
	id := c.Param("id")
	key, err := s.opts.Workspaces.NewKey(c.Request().Context(), id)
	if err != nil {
		return err
	}
	logger(c).Info().Str("event", "workspace.key_created").Str("workspaceId", id).Msg("API key created")
	return writeJSON(c, http.StatusCreated, echo.MIMEApplicationJSON, map[string]string{"workspaceId": id, "apiKey": key})
}

// InboundChannels are the channels whose webhook secret a workspace can set.
var InboundChannels = []string{"slack", "twilio", "telegram", "email"}

// setSecret: PUT /admin/workspaces/{id}/secrets/{channel} {"secret": "..."}
// stores the inbound webhook signing secret for one channel → 204.
func (s *Server) setSecret(c echo.Context) error {
	ch := c.Param("channel")
	known := false
	for _, k := range InboundChannels {
		known = known || k == ch
	}
	if !known {
		return msgapi.Errorf(msgapi.CodeNotFound, "unknown channel %q (slack, twilio, telegram, email)", ch)
	}
	if err := requireJSON(c); err != nil {
		return err
	}
	var in struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(Body(c), &in); err != nil || in.Secret == "" || len(in.Secret) > 512 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the body must be {\"secret\": \"...\"}",
			Fields: []msgapi.FieldError{{Field: "secret", Message: "required, at most 512 bytes"}}}
	}
	// The email relay signs under Standard Webhooks: a whsec_ secret that
	// does not decode would refuse every delivery, so it is refused here.
	if _, err := stdwebhook.ParseSecret(in.Secret); ch == "email" && err != nil {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the email relay secret is not usable",
			Fields: []msgapi.FieldError{{Field: "secret", Message: "whsec_ + standard base64 of 24–64 bytes, or any other non-blank string"}}}
	}
	if err := s.opts.Workspaces.SetSecret(c.Request().Context(), c.Param("id"), ch, in.Secret); err != nil {
		return err
	}
	logger(c).Info().Str("event", events.AdminSecretChanged).Str("workspaceId", c.Param("id")).Str("channel", ch).Msg("workspace webhook secret changed")
	return c.NoContent(http.StatusNoContent)
}
