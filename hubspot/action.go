// Package hubspot is msgapi's HubSpot custom workflow action: the call
// HubSpot makes when a workflow reaches the action (Request, mapped to a
// send body), the outputFields it answers (Outputs), and the durable
// completion of a BLOCKed execution through HubSpot's callback API
// (Callbacks). The route itself is package api's (api/hubspot.go): it
// checks the signature (vendorsig.HubSpot) and runs the send through the
// Idempotency-Key layer with the callbackId as the key.
package hubspot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/msgapi/msgapi/messages"
)

// Execution states of a custom action's outputFields.hs_execution_state.
const (
	StateSuccess      = "SUCCESS"
	StateFailContinue = "FAIL_CONTINUE"
	StateBlock        = "BLOCK"
)

// BlockExpiration is how long HubSpot keeps a BLOCKed execution waiting
// (hs_expiration_duration, ISO 8601): past it HubSpot moves on without us.
const BlockExpiration = "P1D"

// Request is the body HubSpot posts to a custom action's actionUrl.
type Request struct {
	CallbackID string `json:"callbackId"`
	Origin     struct {
		PortalID json.Number `json:"portalId"`
	} `json:"origin"`
	Object struct {
		ObjectID   json.Number `json:"objectId"`
		ObjectType string      `json:"objectType"`
	} `json:"object"`
	InputFields map[string]any `json:"inputFields"`
}

// ParseRequest decodes HubSpot's body; a missing callbackId is an error.
func ParseRequest(body []byte) (Request, error) {
	var r Request
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("the body is not HubSpot's action call: %w", err)
	}
	if strings.TrimSpace(r.CallbackID) == "" {
		return Request{}, fmt.Errorf("callbackId is missing")
	}
	if len(r.CallbackID) > 200 || strings.ContainsFunc(r.CallbackID, func(c rune) bool { return c < 0x20 || c > 0x7e }) {
		return Request{}, fmt.Errorf("callbackId must be at most 200 printable ASCII characters")
	}
	return r, nil
}

// Input field names of the action (deploy/hubspot/action.json).
var inputNames = map[string]string{
	"channel": "channel", "phone": "recipientPhone", "email": "recipientEmail", "body": "body", "subject": "subject",
}

// SendBody is the POST /api/messages body the call asks for: the input
// fields under their API names, the contact as hsContactId and the portal
// as hsPortalId (when the enrolled object is a contact). Empty inputs are
// left out (a workflow's unset property arrives as ""). An input field the
// action does not define is an error, so a misconfigured action fails
// loudly instead of sending without it.
func (r Request) SendBody() ([]byte, error) {
	m := map[string]any{}
	for k, v := range r.InputFields {
		name, ok := inputNames[k]
		if !ok {
			return nil, fmt.Errorf("inputFields.%s is not an input of this action (channel, phone, email, body, subject)", k)
		}
		if s, isStr := v.(string); isStr && strings.TrimSpace(s) == "" {
			continue
		}
		m[name] = v
	}
	if strings.EqualFold(r.Object.ObjectType, "CONTACT") && r.Object.ObjectID != "" {
		m["hsContactId"] = r.Object.ObjectID.String()
	}
	if r.Origin.PortalID != "" {
		m["hsPortalId"] = r.Origin.PortalID.String()
	}
	return json.Marshal(m)
}

// Answer is what the send path answered, as far as HubSpot needs it.
type Answer struct {
	MessageID     string
	Status        string // the message's status; a duplicate's is the original's
	DuplicateOnly bool
	Pending       bool // the original is still in flight (its message may not be written yet)
}

// Outputs are the outputFields of an answer: messageId, status,
// duplicateOnly and the execution state — SUCCESS when the message is
// sent (or further), FAIL_CONTINUE when it reached no one or may not have
// (failed, suppressed, undelivered, unknown), BLOCK while it is in flight.
func Outputs(a Answer) map[string]any {
	out := map[string]any{
		"messageId": a.MessageID, "status": a.Status, "duplicateOnly": a.DuplicateOnly,
		"hs_execution_state": State(a),
	}
	if State(a) == StateBlock {
		out["hs_expiration_duration"] = BlockExpiration
	}
	return out
}

// State is an answer's hs_execution_state.
func State(a Answer) string {
	switch {
	case a.Pending || a.Status == messages.StatusSending:
		return StateBlock
	case a.Status == messages.StatusSent || a.Status == messages.StatusDelivered || a.Status == messages.StatusRead:
		return StateSuccess
	}
	return StateFailContinue
}

// Failure is the outputFields of a call that sent nothing for a reason the
// workflow should see (a refused input): FAIL_CONTINUE with the error.
func Failure(code, detail string) map[string]any {
	return map[string]any{"hs_execution_state": StateFailContinue, "errorCode": code, "error": detail, "messageId": "", "status": "", "duplicateOnly": false}
}
