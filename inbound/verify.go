package inbound

import (
	"net/http"

	"github.com/msgapi/msgapi/vendorsig"
)

const (
	reasonNoSecret         = "no secret configured for this workspace and channel"
	reasonUnknownWorkspace = "unknown workspace"
)

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
