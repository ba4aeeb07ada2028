package send

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/sender"
)

// Backoff of outcome writes: 100 ms doubling to 5 s.
const (
	outcomeBackoffFirst = 100 * time.Millisecond
	outcomeBackoffMax   = 5 * time.Second
)

// recordOutcome stores the provider's answer. The send already happened, so
// its outcome must not be lost to a store hiccup: it retries with backoff
// until the write lands or the process gives up (Options.Lifetime), and
// the answer waits for it, so a caller is never told "sent" while the
// message says "sending" for longer than a blip. What is abandoned anyway
// is logged by message id; the outcome sweeper (sweep.go) turns it into
// "unknown".
func (s *Service) recordOutcome(ctx context.Context, m *messages.Message) {
	log := zerolog.Ctx(ctx)
	ctx = context.WithoutCancel(ctx)
	life := s.o.Lifetime
	backoff := outcomeBackoffFirst
	for attempt := 1; ; attempt++ {
		err := s.o.Messages.RecordOutcome(ctx, m)
		if err == nil {
			break
		}
		if life.Err() != nil {
			log.Error().Err(err).Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).Str("status", m.Status).
				Msg("send outcome abandoned at shutdown; the message says sending until the outcome sweeper marks it unknown")
			break
		}
		log.Warn().Err(err).Str("messageId", m.ID).Int("attempt", attempt).Dur("retryIn", backoff).Msg("could not record the send outcome; retrying")
		select {
		case <-time.After(backoff):
		case <-life.Done():
		}
		backoff = min(2*backoff, outcomeBackoffMax)
	}
	ev := log.Info().Str("event", events.Sent)
	if m.Status != messages.StatusSent {
		ev = log.Warn().Str("event", events.SendFailed).Str("error", sender.Scrub(m.Error, toSenderMessage(m)))
	}
	ev.Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).Str("channel", m.Channel).Str("provider", m.Provider).Str("status", m.Status).Msg("send outcome")
	if s.o.Metrics != nil {
		s.o.Metrics.Sent(m.Channel, m.Status)
	}
}
