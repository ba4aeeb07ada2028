package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/stdwebhook"
	"github.com/msgapi/msgapi/vendorsig"
)

// Routes of the receipts. TwilioPath is what sender.Twilio puts in each
// message's StatusCallback (with ?messageId=).
const (
	TwilioPath = "/api/receipts/twilio"
	RelayPath  = "/api/receipts/webhook"
	maxBody    = 64 << 10
)

var errSignature = msgapi.Errorf(msgapi.CodeUnauthorized, "the receipt signature is missing or invalid")

// twilioStatuses maps Twilio's MessageStatus to msgapi states; the
// statuses before "sent" (accepted, scheduled, queued, sending) move
// nothing and are acknowledged only.
var twilioStatuses = map[string]string{
	"sent": messages.StatusSent, "delivered": messages.StatusDelivered, "undelivered": messages.StatusUndelivered,
	"failed": messages.StatusFailed, "canceled": messages.StatusFailed, "read": messages.StatusRead,
}

// Twilio is POST /api/receipts/twilio (TwilioPath), Twilio's status
// callback, mounted in api/routes.go outside the API-key group: Twilio
// authenticates by signature.
func (h *Handler) Twilio(c echo.Context) error {
	r := c.Request()
	body, err := readBody(c)
	if err != nil {
		return err
	}
	log := zerolog.Ctx(r.Context())
	if !vendorsig.TwilioValid(h.opts.TwilioAuthToken, r.Header, vendorsig.RequestURL(r, h.opts.PublicBaseURL, h.opts.TrustedProxies), body) {
		log.Warn().Str("event", events.ReceiptSignatureInvalid).Str("provider", "twilio").Msg("delivery receipt refused: bad signature")
		return errSignature
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return msgapi.Errorf(msgapi.CodeInvalid, "the body must be a form")
	}
	id := c.QueryParam("messageId")
	sid, st := form.Get("MessageSid"), strings.ToLower(form.Get("MessageStatus"))
	if id == "" || sid == "" || st == "" {
		return msgapi.Errorf(msgapi.CodeInvalid, "messageId (query), MessageSid and MessageStatus are required")
	}
	status, ok := twilioStatuses[st]
	if !ok { // accepted, queued, sending...: nothing to record
		return c.JSON(http.StatusOK, Outcome{MessageID: id, Status: ""})
	}
	out, err := h.Apply(r.Context(), Receipt{MessageID: id, Provider: "twilio", VendorID: sid, Status: status,
		At: twilioTime(form.Get("RawDlrDoneDate"), h.now()), ErrorCode: form.Get("ErrorCode")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// twilioTime reads RawDlrDoneDate (YYMMDDhhmm, UTC: the carrier's time of
// the final status), when Twilio passes it on; else now.
func twilioTime(v string, now time.Time) time.Time {
	if t, err := time.Parse("0601021504", v); err == nil {
		return t
	}
	return now
}

// relayReceipt is the relay's status callback body.
type relayReceipt struct {
	MessageID         string `json:"messageId"`
	Status            string `json:"status"`
	OccurredAt        string `json:"occurredAt"`
	ErrorCode         string `json:"errorCode"`
	ProviderMessageID string `json:"providerMessageId"`
}

var relayStatuses = map[string]string{
	"sent": messages.StatusSent, "delivered": messages.StatusDelivered, "undelivered": messages.StatusUndelivered,
	"failed": messages.StatusFailed, "read": messages.StatusRead,
}

// Relay is POST /api/receipts/webhook (RelayPath), the webhook relay's
// receipt, signed with the relay secret.
func (h *Handler) Relay(c echo.Context) error {
	r := c.Request()
	body, err := readBody(c)
	if err != nil {
		return err
	}
	log := zerolog.Ctx(r.Context())
	key, kerr := stdwebhook.ParseSecret(h.opts.RelaySecret)
	if kerr != nil || stdwebhook.Verify(key, r.Header, body, h.now(), stdwebhook.Tolerance) != nil {
		log.Warn().Str("event", events.ReceiptSignatureInvalid).Str("provider", "webhook").Msg("delivery receipt refused: bad signature")
		return errSignature
	}
	var in relayReceipt
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return msgapi.Errorf(msgapi.CodeInvalid, "the body must be JSON: {messageId, status, occurredAt?, errorCode?, providerMessageId?}")
	}
	var fields []msgapi.FieldError
	status, ok := relayStatuses[in.Status]
	if !ok {
		fields = append(fields, msgapi.FieldError{Field: "status", Message: "one of sent, delivered, undelivered, failed, read"})
	}
	if in.MessageID == "" {
		fields = append(fields, msgapi.FieldError{Field: "messageId", Message: "required"})
	}
	var at time.Time
	if in.OccurredAt != "" {
		if at, err = time.Parse(time.RFC3339Nano, in.OccurredAt); err != nil {
			fields = append(fields, msgapi.FieldError{Field: "occurredAt", Message: "an RFC 3339 time"})
		}
	}
	if len(fields) > 0 {
		return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the receipt is invalid", Fields: fields}
	}
	out, err := h.Apply(r.Context(), Receipt{MessageID: in.MessageID, Provider: "webhook", VendorID: in.ProviderMessageID, Status: status, At: at, ErrorCode: in.ErrorCode})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func readBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > maxBody {
		return nil, msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than 64 KiB")
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than 64 KiB")
		}
		return nil, msgapi.Errorf(msgapi.CodeInvalid, "the request body could not be read")
	}
	return b, nil
}
