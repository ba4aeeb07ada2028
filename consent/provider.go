package consent

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/sender"
)

// Sender is one provider (sender.Twilio, sender.SMTP, …).
type Sender interface {
	Send(ctx context.Context, m sender.Message) sender.Result
	Name() string
}

// providerSignals wraps a provider: a refusal that says "this recipient
// opted out" (sender.CodeOptedOut, Twilio 21610) puts the recipient on
// the workspace's list before the send path sees the result, so the
// message ends failed and the next send to the address is suppressed.
type providerSignals struct {
	Sender
	s *Store
}

// ProviderSignals returns next, with its opt-out refusals recorded.
func (s *Store) ProviderSignals(next Sender) Sender { return providerSignals{Sender: next, s: s} }

func (p providerSignals) Send(ctx context.Context, m sender.Message) sender.Result {
	res := p.Sender.Send(ctx, m)
	if res.Code != sender.CodeOptedOut {
		return res
	}
	addr := m.RecipientPhone
	if m.Channel == "email" || addr == "" {
		addr = m.RecipientEmail
	}
	ev := Evidence{MessageID: m.ID, Channel: m.Channel, ProviderError: p.Sender.Name() + ": " + res.Error}
	if _, _, err := p.s.Suppress(ctx, m.WorkspaceID, addr, SourceProvider, ev); err != nil {
		// The refusal stands either way; the provider refuses the next
		// send too, and that one records it.
		zerolog.Ctx(ctx).Error().Err(err).Str("messageId", m.ID).Msg("provider said the recipient opted out; the suppression could not be written")
	}
	return res
}
