package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/workspace"
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
	d := json.NewDecoder(bytes.NewReader(Body(c)))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		e := &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the body must be a JSON object like {\"name\": \"Acme\"}"}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			e.Fields = []msgapi.FieldError{{Field: strings.Trim(f, `"`), Message: "is not a member of this object (name is the only one)"}}
		}
		return e
	}
	ws, key, err := s.opts.Workspaces.Create(c.Request().Context(), in.Name)
	if err != nil {
		return err
	}
	logger(c).Info().Str("event", "workspace.created").Str("workspaceId", ws.ID).Msg("workspace created")
	return writeJSON(c, http.StatusCreated, echo.MIMEApplicationJSON, map[string]string{
		"workspaceId": ws.ID, "name": ws.Name, "apiKey": key, "keyId": workspace.KeyID(workspace.HashKey(key)),
	})
}

// createKey: POST /admin/workspaces/{id}/keys, with no body or
// {"test": true} for a test key → 201 {"apiKey", "keyId", "prefix",
// "test"}; the key is shown this once.
func (s *Server) createKey(c echo.Context) error {
	id := c.Param("id")
	var in struct {
		Test bool `json:"test"`
	}
	if b := Body(c); len(bytes.TrimSpace(b)) > 0 {
		if err := requireJSON(c); err != nil {
			return err
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&in); err != nil {
			return &msgapi.Error{Code: msgapi.CodeInvalid, Message: `the body must be empty or {"test": true|false}`,
				Fields: []msgapi.FieldError{{Field: "test", Message: "a boolean"}}}
		}
	}
	key, err := s.opts.Workspaces.NewKey(c.Request().Context(), id, in.Test)
	if err != nil {
		return err
	}
	logger(c).Info().Str("event", "workspace.key_created").Str("workspaceId", id).Bool("test", in.Test).Msg("API key created")
	return writeJSON(c, http.StatusCreated, echo.MIMEApplicationJSON, map[string]any{
		"workspaceId": id, "apiKey": key, "keyId": workspace.KeyID(workspace.HashKey(key)), "prefix": workspace.Prefix(key), "test": in.Test,
	})
}

// MinSecretLen is the shortest channel signing secret accepted: 16 bytes,
// 128 bits when random. The vendors' own are longer (Slack's signing
// secret and Twilio's auth token are 32 hex digits); Telegram lets the
// user choose its secret_token (1–256 characters), and a short one is a
// guessable signature.
const MinSecretLen = 16

// InboundChannels are the channels whose webhook secret a workspace can set:
// the inbound webhooks', and HubSpot's — "hubspot", the app's client
// secret that signs custom action calls, and "hubspot-token", the access
// token that completes BLOCKed executions (api/hubspot.go).
var InboundChannels = []string{"slack", "twilio", "telegram", "email", SecretHubSpot, SecretHubSpotToken}

// The HubSpot custom action's secrets.
const (
	SecretHubSpot      = "hubspot"
	SecretHubSpotToken = "hubspot-token"
)

// setSecret: PUT /admin/workspaces/{id}/secrets/{channel} {"secret": "..."}
// stores the inbound webhook signing secret for one channel → 204.
func (s *Server) setSecret(c echo.Context) error {
	ch := c.Param("channel")
	known := false
	for _, k := range InboundChannels {
		known = known || k == ch
	}
	if !known {
		return msgapi.Errorf(msgapi.CodeNotFound, "unknown channel %q (slack, twilio, telegram, email, hubspot, hubspot-token)", ch)
	}
	if err := requireJSON(c); err != nil {
		return err
	}
	var in struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(Body(c), &in); err != nil || len(in.Secret) < MinSecretLen || len(in.Secret) > 512 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the body must be {\"secret\": \"...\"}",
			Fields: []msgapi.FieldError{{Field: "secret", Message: fmt.Sprintf("required, %d to 512 bytes", MinSecretLen)}}}
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

// workspaceView is the admin API's workspace: never its secrets, only the
// channels that have one. A null setting means the server's default.
type workspaceView struct {
	WorkspaceID    string       `json:"workspaceId"`
	Name           string       `json:"name"`
	CreatedAt      time.Time    `json:"createdAt"`
	Disabled       bool         `json:"disabled"`
	Settings       settingsView `json:"settings"`
	WebhookSecrets []string     `json:"webhookSecrets"`
}

type settingsView struct {
	DedupWindow   *string          `json:"dedupWindow"`
	DedupWait     *string          `json:"dedupWait"`
	RateLimit     *ratelimit.Limit `json:"rateLimit"`
	DefaultRegion *string          `json:"defaultRegion"`
	OptOutReply   *string          `json:"optOutReply"`
	PendingStatus *int             `json:"pendingStatus"`
	RefusedStatus *int             `json:"refusedStatus"`
	AnswerProfile *string          `json:"answerProfile"`
	// QuietHours: null when the workspace has none.
	QuietHours *workspace.QuietHours `json:"quietHours"`
}

func viewOf(ws workspace.Workspace) workspaceView {
	dur := func(d *time.Duration) *string {
		if d == nil {
			return nil
		}
		s := workspace.FormatDuration(*d)
		return &s
	}
	secrets := []string{}
	for _, ch := range InboundChannels {
		if ws.Secrets[ch] != "" {
			secrets = append(secrets, ch)
		}
	}
	return workspaceView{
		WorkspaceID: ws.ID, Name: ws.Name, CreatedAt: ws.CreatedAt.UTC(), Disabled: ws.Disabled,
		Settings: settingsView{
			DedupWindow: dur(ws.Settings.DedupWindow), DedupWait: dur(ws.Settings.DedupWait),
			RateLimit: ws.Settings.RateLimit, DefaultRegion: ptr(ws.Settings.DefaultRegion),
			OptOutReply:   ptr(ws.Settings.OptOutReply),
			PendingStatus: intPtr(ws.Settings.PendingStatus), RefusedStatus: intPtr(ws.Settings.RefusedStatus),
			AnswerProfile: ptr(ws.Settings.AnswerProfile),
			QuietHours:    ws.Settings.QuietHours,
		},
		WebhookSecrets: secrets,
	}
}

// getWorkspace: GET /admin/workspaces/{id} → 200 the workspace.
func (s *Server) getWorkspace(c echo.Context) error {
	ws, err := s.opts.Workspaces.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, viewOf(ws))
}

// updateWorkspace: PATCH /admin/workspaces/{id} with a JSON merge patch of
// settings → 200 the workspace. Every process applies it within the key
// cache TTL.
func (s *Server) updateWorkspace(c echo.Context) error {
	if err := requireJSON(c); err != nil {
		return err
	}
	p, err := workspace.ParseSettingsPatch(Body(c))
	if err != nil {
		return err
	}
	id := c.Param("id")
	ws, err := s.opts.Workspaces.UpdateSettings(c.Request().Context(), id, p)
	if err != nil {
		return err
	}
	logger(c).Info().Str("event", events.WorkspaceSettingsChanged).Str("workspaceId", id).Msg("workspace settings changed")
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, viewOf(ws))
}

// disableWorkspace and enableWorkspace: POST /admin/workspaces/{id}/disable
// and /enable → 200 the workspace.
func (s *Server) disableWorkspace(c echo.Context) error { return s.setDisabled(c, true) }
func (s *Server) enableWorkspace(c echo.Context) error  { return s.setDisabled(c, false) }

func (s *Server) setDisabled(c echo.Context, disabled bool) error {
	id := c.Param("id")
	ws, err := s.opts.Workspaces.SetDisabled(c.Request().Context(), id, disabled)
	if err != nil {
		return err
	}
	ev, msg := events.WorkspaceEnabled, "workspace enabled"
	if disabled {
		ev, msg = events.WorkspaceDisabled, "workspace disabled: its API keys and webhooks are refused"
	}
	logger(c).Info().Str("event", ev).Str("workspaceId", id).Msg(msg)
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, viewOf(ws))
}

// keyView is one API key as the admin API shows it: never the key.
type keyView struct {
	ID         string     `json:"id"`
	Prefix     *string    `json:"prefix"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	Test       bool       `json:"test"`
}

// listKeys: GET /admin/workspaces/{id}/keys → 200 {"keys": [...]}, oldest
// first.
func (s *Server) listKeys(c echo.Context) error {
	id := c.Param("id")
	keys, err := s.opts.Workspaces.Keys(c.Request().Context(), id)
	if err != nil {
		return err
	}
	out := make([]keyView, 0, len(keys))
	for _, k := range keys {
		v := keyView{ID: k.ID, Prefix: ptr(k.Prefix), CreatedAt: k.CreatedAt.UTC(), LastUsedAt: k.LastUsedAt, Test: k.Test}
		if v.LastUsedAt != nil {
			t := v.LastUsedAt.UTC()
			v.LastUsedAt = &t
		}
		out = append(out, v)
	}
	return writeJSON(c, http.StatusOK, echo.MIMEApplicationJSON, map[string]any{"workspaceId": id, "keys": out})
}

// revokeKey: DELETE /admin/workspaces/{id}/keys/{keyId} → 204.
func (s *Server) revokeKey(c echo.Context) error {
	id, keyID := c.Param("id"), c.Param("keyId")
	if err := s.opts.Workspaces.RevokeKey(c.Request().Context(), id, keyID); err != nil {
		return err
	}
	logger(c).Info().Str("event", events.WorkspaceKeyRevoked).Str("workspaceId", id).Str("keyId", keyID).Msg("API key revoked")
	return c.NoContent(http.StatusNoContent)
}

// ptr is s as a JSON string, or null when empty.
func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// intPtr is n as a JSON number, or null when zero.
func intPtr(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
