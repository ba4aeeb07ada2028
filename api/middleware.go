package api

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/workspace"
)

const (
	// MaxBody is the largest request body accepted (SPEC: 1 MiB).
	MaxBody = 1 << 20

	ctxWorkspace = "msgapi.workspace"
	ctxBody      = "msgapi.body"
	ctxRequestID = "msgapi.requestId"
	headerReqID  = "X-Request-Id"
)

// requestContext assigns the request id (the caller's X-Request-Id when it
// is sane, else a new one), echoes it, puts a request-scoped logger into the
// request context and writes one access-log line when the request ends.
func (s *Server) requestContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		id := c.Request().Header.Get(headerReqID)
		if !validRequestID(id) {
			id = msgapi.NewID("req")
		}
		c.Set(ctxRequestID, id)
		c.Response().Header().Set(headerReqID, id)
		c.Response().Header().Set(HeaderVersion, APIVersion)
		log := s.log.With().Str("requestId", id).Logger()
		c.SetRequest(c.Request().WithContext(log.WithContext(c.Request().Context())))

		err := s.recovered(c, next)
		if err != nil {
			c.Error(err) // writes the problem document now, so the status below is final
		}
		ws, _ := c.Get(ctxWorkspace).(workspace.Workspace)
		ev := log.Info()
		if c.Response().Status >= 500 && c.Response().Status != StatusClientClosed {
			ev = log.Warn()
		}
		ev.Str("event", events.HTTPRequest).
			Str("method", c.Request().Method).
			Str("route", c.Path()).
			Int("status", c.Response().Status).
			Str("workspaceId", ws.ID).
			Dur("duration", time.Since(start)).
			Msg("request")
		return nil
	}
}

// recovered runs next and turns a panic into an error: the caller gets a
// problem+json 500 with its request id, the log an error event with the
// stack, and the process keeps serving. (The Idempotency-Key middleware
// recovers on its own first, to settle its claim.)
func (s *Server) recovered(c echo.Context, next echo.HandlerFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = panicked(c, r)
		}
	}()
	return next(c)
}

// panicked logs a recovered panic with its stack and returns the internal
// error that answers it.
func panicked(c echo.Context, r any) error {
	logger(c).Error().Str("event", events.Panic).Str("panic", fmt.Sprint(r)).
		Bytes("stack", debug.Stack()).Msg("handler panicked")
	return fmt.Errorf("panic: %v", r)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

func requestID(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// logger is the request-scoped logger.
func logger(c echo.Context) *zerolog.Logger {
	return zerolog.Ctx(c.Request().Context())
}

// HeaderAPIKey carries the API key for callers that cannot send
// Authorization: Bearer (HubSpot's webhook action names its "API key"
// header freely; HighLevel's Custom Webhook sets any header).
const HeaderAPIKey = "X-API-Key"

// authenticate resolves the API key (Authorization: Bearer, or X-API-Key)
// to its workspace. Both present and different is 401: which one was meant
// is not guessed.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, ok := bearer(c.Request())
		if x := strings.TrimSpace(c.Request().Header.Get(HeaderAPIKey)); x != "" {
			if ok && key != x {
				return msgapi.Errorf(msgapi.CodeUnauthorized, "Authorization and X-API-Key name different keys; send one")
			}
			key, ok = x, true
		}
		if !ok {
			return msgapi.Errorf(msgapi.CodeUnauthorized, "a valid API key is required: Authorization: Bearer <key> or X-API-Key: <key>")
		}
		ws, err := s.opts.Workspaces.Authenticate(c.Request().Context(), key)
		if err != nil {
			return err
		}
		// workspaceId is not added to the request logger: the guard and the
		// Idempotency-Key events carry it themselves (one key per line).
		c.Set(ctxWorkspace, ws)
		return next(c)
	}
}

// adminOnly checks the admin token in constant time. Without a configured
// token the admin API does not exist (404).
func (s *Server) adminOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.AdminToken == "" {
			return msgapi.Errorf(msgapi.CodeNotFound, "the admin API is disabled (set MSGAPI_ADMIN_TOKEN)")
		}
		tok, ok := bearer(c.Request())
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.AdminToken)) != 1 {
			return msgapi.Errorf(msgapi.CodeUnauthorized, "the admin token is missing or wrong")
		}
		return next(c)
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get(echo.HeaderAuthorization)
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}

// WorkspaceID returns the authenticated workspace's id ("" before auth).
func WorkspaceID(c echo.Context) string {
	ws, _ := c.Get(ctxWorkspace).(workspace.Workspace)
	return ws.ID
}

func currentWorkspace(c echo.Context) workspace.Workspace {
	ws, _ := c.Get(ctxWorkspace).(workspace.Workspace)
	return ws
}

// readBody reads the whole body, at most MaxBody bytes (413 past that), and
// makes it available to later middleware and the handler; the request body
// is replaced by a reader over the same bytes.
func readBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > MaxBody {
			return msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than 1 MiB")
		}
		b, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, MaxBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return msgapi.Errorf(msgapi.CodeTooLarge, "the request body is larger than 1 MiB")
			}
			return msgapi.Errorf(msgapi.CodeInvalid, "the request body could not be read")
		}
		c.Set(ctxBody, b)
		r.Body = io.NopCloser(bytes.NewReader(b))
		return next(c)
	}
}

// Body returns the bytes readBody read.
func Body(c echo.Context) []byte {
	b, _ := c.Get(ctxBody).([]byte)
	return b
}

// requireJSON answers 415 unless the body is declared JSON.
func requireJSON(c echo.Context) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	mt := strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return msgapi.Errorf(msgapi.CodeUnsupportedMedia, "the request body must be JSON (Content-Type: application/json)")
	}
	return nil
}
