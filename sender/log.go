package sender

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// Log records messages as sent without contacting anyone. It is the local
// default, so that one command starts a working server.
type Log struct {
	log   zerolog.Logger
	delay time.Duration
}

// NewLog returns a Log provider that waits delay before each "delivery", to
// make local runs behave a little like a real provider.
func NewLog(log zerolog.Logger, delay time.Duration) *Log {
	return &Log{log: log, delay: max(delay, 0)}
}

// Name returns "log".
func (*Log) Name() string { return "log" }

// Send waits for the delay and reports the message sent. If ctx ends first it
// reports Failed: this provider knows for certain that nothing went out.
func (l *Log) Send(ctx context.Context, m Message) Result {
	if err := ctx.Err(); err != nil {
		return failed("log sender: %v", err)
	}
	timer := time.NewTimer(l.delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return failed("log sender: %v", ctx.Err())
	case <-timer.C:
	}
	// The request's logger when there is one (its requestId), else ours.
	// Never the body or the recipient at info level.
	log := zerolog.Ctx(ctx)
	if log.GetLevel() == zerolog.Disabled {
		log = &l.log
	}
	log.Info().Str("event", EventLogDelivered).
		Str("messageId", m.ID).Str("workspaceId", m.WorkspaceID).Str("channel", m.Channel).
		Msg("message recorded as sent; no provider was contacted")
	return Result{Status: Sent, ProviderMessageID: "log-" + m.ID}
}
