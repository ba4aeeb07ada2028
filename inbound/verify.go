package inbound

import (
	"net/http"

	"github.com/msgapi/msgapi/vendorsig"
)

const (
	reasonNoSecret         = "no secret configured for this workspace and channel"
	reasonUnknownWorkspace = "unknown workspace"
)

// precheck is verify without the body: it fails a call whose signature
// headers are missing, malformed or stale, or whose Telegram token is wrong,
// before the body is read. "" means the body is worth reading and verify
// decides. A verifier run over an empty body fails only on the MAC when
// everything else about the call is right, so that failure is the one
// precheck lets through.
func (h *Handler) precheck(ch, secret string, r *http.Request) string {
	if secret == "" {
		return reasonNoSecret
	}
	var reason string
	switch ch {
	case ChannelSlack:
		reason = vendorsig.Slack(secret, r.Header, nil, h.now())
	case ChannelTwilio:
		reason = vendorsig.TwilioHeader(r.Header)
	case ChannelTelegram:
		return vendorsig.Telegram(secret, r.Header) // the whole check: a header
	case ChannelEmail:
		if reason = vendorsig.RetiredRelay(r.Header); reason == "" || vendorsig.UsesStandard(r.Header) {
			reason = vendorsig.Standard(secret, r.Header, nil, h.now())
		}
	}
	if vendorsig.IsMismatch(reason) {
		return ""
	}
	return reason
}

// verify checks the vendor's signature over the raw body and returns why it
// failed, or "" when it is valid. Every comparison is constant-time.
func (h *Handler) verify(ch, secret string, r *http.Request, body []byte) string {
	if secret == "" {
		return reasonNoSecret
	}
	switch ch {
	case ChannelSlack:
		return vendorsig.Slack(secret, r.Header, body, h.now())
	case ChannelTwilio:
		return vendorsig.Twilio(secret, r.Header, h.requestURL(r), body)
	case ChannelTelegram:
		return vendorsig.Telegram(secret, r.Header)
	case ChannelEmail:
		// Standard Webhooks only. The untimed X-Msgapi-Signature was
		// accepted for one release (round 2) and is retired: a call that
		// still sends it alone is told so.
		if !vendorsig.UsesStandard(r.Header) {
			if reason := vendorsig.RetiredRelay(r.Header); reason != "" {
				return reason
			}
		}
		return vendorsig.Standard(secret, r.Header, body, h.now())
	}
	return reasonNoSecret
}
