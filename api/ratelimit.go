package api

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/ratelimit"
)

// RateLimiter decides whether a workspace may send one more request now
// (ratelimit.Limiter). An error means its shared backend failed and the
// decision was taken in process; it is logged, never shown.
type RateLimiter interface {
	Allow(ctx context.Context, key string, l ratelimit.Limit) (ratelimit.Decision, error)
}

// rateLimit refuses a workspace's request past its limit with 429 and
// Retry-After. It runs after authentication (the limit is the workspace's)
// and before the body is read and the Idempotency-Key is looked up, so a
// refused request costs no store round trip; an Idempotency-Key replay
// counts like any other request (a client over its limit waits Retry-After
// for its replay too).
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.Limiter == nil {
			return next(c)
		}
		ws := currentWorkspace(c)
		lim := ws.RateLimit(s.opts.RateLimit)
		d, err := s.opts.Limiter.Allow(c.Request().Context(), ws.ID, lim)
		if err != nil {
			logger(c).Warn().Err(err).Str("event", events.RateLimitBackendError).Str("workspaceId", ws.ID).
				Msg("rate limit: Redis failed; this process's own bucket decided")
		}
		setRateLimitHeaders(c, lim, d)
		if d.Allowed {
			return next(c)
		}
		if s.opts.OnRateLimited != nil {
			s.opts.OnRateLimited(c.Path(), ws.ID)
		}
		return &msgapi.Error{
			Code:       msgapi.CodeRateLimited,
			Message:    fmt.Sprintf("this workspace may send %d messages a second, in bursts of up to %d; nothing was sent, retry after Retry-After seconds", lim.PerSecond, lim.Burst),
			RetryAfter: d.RetryAfter,
		}
	}
}

// setRateLimitHeaders writes the IETF httpapi RateLimit-Policy and
// RateLimit fields (draft-ietf-httpapi-ratelimit-headers) for the
// workspace's token bucket: a quota of burst requests over the time the
// bucket takes to fill (w), the whole tokens left (r) and the seconds until
// the bucket is full again (t).
func setRateLimitHeaders(c echo.Context, lim ratelimit.Limit, d ratelimit.Decision) {
	if lim.Unlimited() {
		return
	}
	burst := max(lim.Burst, 1)
	w := max(1, int(math.Ceil(float64(burst)/float64(lim.PerSecond))))
	h := c.Response().Header()
	h.Set("RateLimit-Policy", fmt.Sprintf(`"workspace";q=%d;w=%d`, burst, w))
	h.Set("RateLimit", fmt.Sprintf(`"workspace";r=%d;t=%s`, max(d.Remaining, 0), strconv.Itoa(seconds(d.Full))))
}

// seconds rounds d up to whole seconds.
func seconds(d time.Duration) int { return int(math.Ceil(max(d, 0).Seconds())) }

// RedeliverPerSecond and RedeliverBurst bound POST
// /api/events/{id}/redeliver per workspace: each call schedules a delivery
// to every subscribed endpoint.
const (
	RedeliverPerSecond = 1
	RedeliverBurst     = 5
)

// redeliverLimit refuses a workspace's redelivery past its limit with
// 429 and Retry-After (a bucket of its own, apart from the send limit).
func (s *Server) redeliverLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.Limiter == nil {
			return next(c)
		}
		ws := currentWorkspace(c)
		lim := ratelimit.Limit{PerSecond: RedeliverPerSecond, Burst: RedeliverBurst}
		d, err := s.opts.Limiter.Allow(c.Request().Context(), "redeliver/"+ws.ID, lim)
		if err != nil {
			logger(c).Warn().Err(err).Str("event", events.RateLimitBackendError).Str("workspaceId", ws.ID).
				Msg("rate limit: Redis failed; this process's own bucket decided")
		}
		setRateLimitHeaders(c, lim, d)
		if d.Allowed {
			return next(c)
		}
		if s.opts.OnRateLimited != nil {
			s.opts.OnRateLimited(c.Path(), ws.ID)
		}
		return &msgapi.Error{
			Code:       msgapi.CodeRateLimited,
			Message:    fmt.Sprintf("this workspace may redeliver events %d a second, in bursts of up to %d; retry after Retry-After seconds", RedeliverPerSecond, RedeliverBurst),
			RetryAfter: d.RetryAfter,
		}
	}
}
