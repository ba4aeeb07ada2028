package send

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/contact"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/workspace"
)

// quietHours applies the workspace's quiet hours (README: Quiet hours) to
// a valid request that is about to go out now, or at its sendAt when
// scheduled: inside the window in the recipient's time zone, "defer" makes
// it a scheduled send at the window's end, "refuse" answers CodeQuietHours
// with Retry-After at the end (nothing written, nothing stored under an
// Idempotency-Key: the caller's retry then goes through). It returns
// whether the request is now a scheduled send.
func (s *Service) quietHours(ctx context.Context, ws workspace.Workspace, req *Request, scheduled bool) (bool, error) {
	q := ws.Settings.QuietHours
	if q == nil {
		return scheduled, nil
	}
	now := s.o.Now()
	at := now
	if scheduled {
		at = req.SendAt
	}
	phone, _ := req.DeliveryAddress()
	var zones []string
	if phone != "" {
		zones = contact.TimeZones(phone) // email and unplaced numbers: the workspace's zone
	}
	end, inside := q.Until(at, zones)
	if !inside {
		return scheduled, nil
	}
	log := zerolog.Ctx(ctx).Info().Str("workspaceId", ws.ID).Strs("timeZones", zones).Time("windowEnd", end)
	switch {
	case req.IgnoreQuietHours:
		log.Str("event", events.QuietIgnored).Msg("inside quiet hours, sent anyway: the request said ignoreQuietHours")
		return scheduled, nil
	case q.Mode == workspace.QuietRefuse:
		log.Str("event", events.QuietRefused).Msg("inside quiet hours: refused until the window ends")
		return false, &msgapi.Error{Code: msgapi.CodeQuietHours, RetryAfter: max(end.Sub(now), time.Second),
			Message: fmt.Sprintf("it is quiet hours (%s to %s) for this recipient until %s; nothing was sent: retry then, or send with ignoreQuietHours for a transactional text",
				q.Start, q.End, end.Format(time.RFC3339))}
	case s.o.Schedule == nil:
		return false, msgapi.Errorf(msgapi.CodeInvalid, "quiet hours defer sends, and scheduled sends are not enabled on this server")
	}
	log.Str("event", events.QuietDeferred).Msg("inside quiet hours: scheduled for the window's end")
	req.SendAt = end
	return true, nil
}
