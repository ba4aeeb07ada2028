package api

import (
	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/openapi"
)

// routes mounts every route and its middleware. Read top to bottom, this is
// the whole HTTP surface.
func (s *Server) routes(e *echo.Echo) {
	e.Use(s.requestContext)
	for _, m := range s.opts.Middleware {
		e.Use(m)
	}

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	openapi.Register(e) // GET /openapi.yaml, GET /docs

	api := e.Group("/api", s.authenticate)
	// 429 before any store work; the Idempotency-Key layer after auth and
	// before validation and the guard (keyed).
	// The answer profile before the key layer: it decides the key's 409 too.
	api.POST("/messages", s.keyed(s.sendMessage), s.rateLimit, s.answerProfile, readBody)
	api.GET("/messages/:id", s.getMessage)
	api.POST("/messages/:id/cancel", s.cancelMessage)
	api.POST("/messages/cancel", s.cancelByKey, readBody)
	api.GET("/messages", s.listMessages)
	api.GET("/leads", s.findLeads)
	api.GET("/leads/:id", s.getLead)
	api.GET("/conversations/:id", s.getConversation)
	api.DELETE("/dedup-locks/:lockId", s.deleteDedupLock)
	if s.opts.Consent != nil { // the suppression list (suppressions.go)
		api.GET("/suppressions", s.listSuppressions)
		api.POST("/suppressions", s.createSuppression, readBody)
		api.GET("/suppressions/:address", s.getSuppression)
		api.DELETE("/suppressions/:address", s.deleteSuppression)
	}
	if s.opts.Outbox != nil { // event webhooks (webhookendpoints.go)
		api.POST("/webhook-endpoints", s.createEndpoint, readBody)
		api.GET("/webhook-endpoints", s.listEndpoints)
		api.DELETE("/webhook-endpoints/:id", s.deleteEndpoint)
		api.GET("/events", s.listEvents)
		api.GET("/events/:id", s.getEvent)
		api.POST("/events/:id/redeliver", s.redeliverEvent, s.redeliverLimit)
	}

	// The one-click unsubscribe URL of emails (RFC 8058): public, the
	// sealed token is the authorisation.
	if s.opts.Consent != nil && s.opts.Unsubscribe != nil {
		e.GET(UnsubscribePath+":token", s.unsubscribeGet)
		e.POST(UnsubscribePath+":token", s.unsubscribePost)
	}

	admin := e.Group("/admin", s.adminOnly)
	admin.POST("/workspaces", s.createWorkspace, readBody)
	admin.POST("/workspaces/:id/keys", s.createKey, readBody)
	admin.PUT("/workspaces/:id/secrets/:channel", s.setSecret, readBody)
	admin.GET("/workspaces/:id", s.getWorkspace)
	admin.PATCH("/workspaces/:id", s.updateWorkspace, readBody)
	admin.POST("/workspaces/:id/disable", s.disableWorkspace)
	admin.POST("/workspaces/:id/enable", s.enableWorkspace)
	admin.GET("/workspaces/:id/keys", s.listKeys)
	admin.DELETE("/workspaces/:id/keys/:keyId", s.revokeKey)

	// Vendors authenticate by signature, not by API key: outside /api's
	// group. Inbound webhooks use the workspace's channel secret (package
	// inbound); delivery receipts the provider's (package receipts).
	if s.opts.Inbound != nil {
		e.POST("/api/webhooks/:workspaceId/:channel", s.opts.Inbound)
	}
	// HubSpot's custom workflow action, signed with the workspace's HubSpot
	// app secret (hubspot.go); the workspace's rate limit applies.
	if s.opts.HubSpot != nil {
		e.POST(HubSpotActionPath, s.hubspotAction, readBody, s.hubspotVerify, s.rateLimit)
	}
	if s.opts.TwilioReceipt != nil {
		e.POST("/api/receipts/twilio", s.opts.TwilioReceipt)
	}
	if s.opts.RelayReceipt != nil {
		e.POST("/api/receipts/webhook", s.opts.RelayReceipt)
	}
	if s.opts.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(s.opts.Metrics))
	}
}

// keyed applies the Idempotency-Key layer to h, when there is one.
func (s *Server) keyed(h idempotency.Handler) echo.HandlerFunc {
	if s.opts.Idempotency != nil {
		return s.opts.Idempotency.Wrap(h)
	}
	return func(c echo.Context) error {
		_, err := h(c, "")
		return err
	}
}
