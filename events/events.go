// Package events names every event msgapi emits. An event is a zerolog line
// with an "event" field; Loki indexes only the low-cardinality labels (app,
// env, level, event) and everything else stays in the JSON line.
package events

// Event names. Dashboards and alerts query these strings: never rename one.
const (
	DuplicateBlocked    = "message.api.duplicate_blocked"
	DuplicatePending    = "message.api.duplicate_pending"
	DuplicateGuardError = "message.api.duplicate_guard_error"
	Sent                = "message.api.sent"
	SendFailed          = "message.api.send_failed"
	IdempotentReplay    = "message.api.idempotent_replay"
	IdempotencyConflict = "message.api.idempotency_conflict"

	DedupLockDeleted = "message.api.dedup_lock_deleted"
	LockTakenOver    = "message.api.dedup_lock_taken_over"
	// SendFenced: a request was declared gone (lease, operator delete, a
	// takeover of its Idempotency-Key) before its message was written; its
	// message id holds a tombstone and it did not send.
	SendFenced = "message.api.send_fenced"
	// OutcomeLost: a message was still "sending" long after the send
	// timeout (its process ended during the provider call): now "unknown".
	OutcomeLost = "message.api.outcome_lost"

	// IndexFailed: a written message could not be added to the listing
	// index (GET /api/messages); it was still sent.
	IndexFailed = "message.api.index_failed"

	InboundReceived         = "inbound.received"
	InboundDuplicate        = "inbound.duplicate"
	InboundContentDuplicate = "inbound.content_duplicate"
	InboundSignatureInvalid = "inbound.signature_invalid"
	InboundFastpathError    = "inbound.dedup_fastpath_error"

	// HubSpot custom workflow action (package hubspot): a call whose
	// signature failed (nothing was written); a BLOCKed execution completed
	// at HubSpot's callback API; a completion HubSpot refused or that ran
	// out of time (the execution then expires at HubSpot).
	// Scheduled sends: accepted for later; canceled before their time; the
	// scheduler could not read or write the schedule (it retries at the
	// next tick); a slot whose message was missing at its time was fenced.
	Scheduled          = "message.api.scheduled"
	Canceled           = "message.api.canceled"
	ScheduleStoreError = "schedule.store_error"
	ScheduleFenced     = "schedule.fenced"
	// Quiet hours: a send was deferred to the window's end, refused, or
	// sent inside the window because the request said ignoreQuietHours.
	QuietDeferred = "message.api.quiet_hours_deferred"
	QuietRefused  = "message.api.quiet_hours_refused"
	QuietIgnored  = "message.api.quiet_hours_ignored"

	HubSpotSignatureInvalid = "hubspot.signature_invalid"
	HubSpotCallbackDone     = "hubspot.callback_completed"
	HubSpotCallbackFailed   = "hubspot.callback_failed"
	// The callbacks' loop could not read the waiting executions (the store
	// is down); it reads again at the next poll.
	HubSpotStoreError = "hubspot.store_error"

	HTTPRequest = "http.request"
	// Panic: a handler panicked; the caller got a 500 and the process
	// kept serving. The line carries the stack.
	Panic = "http.panic"

	WorkspaceKeyRevoked      = "workspace.key_revoked"
	WorkspaceDisabled        = "workspace.disabled"
	WorkspaceEnabled         = "workspace.enabled"
	WorkspaceSettingsChanged = "workspace.settings_changed"
	RateLimitBackendError    = "api.rate_limit_backend_error"
)

// Audit events of the admin API. They name what changed, never a secret.
const (
	// AdminSecretChanged: a workspace's webhook secret for a channel was
	// set or replaced (PUT /admin/workspaces/{id}/secrets/{channel}).
	AdminSecretChanged = "admin.secret_changed"
)

// Modes of DuplicateBlocked.
const (
	ModeLockResolved       = "lock_resolved"
	ModeLockResolvedPolled = "lock_resolved_polled"
)

// Event webhooks (package notify) and delivery receipts (package receipts).
const (
	WebhookAttempt          = "webhook.attempt"
	WebhookEndpointDisabled = "webhook.endpoint_disabled"
	WebhookStoreError       = "webhook.store_error"
	ReceiptRecorded         = "receipt.recorded"
	ReceiptDuplicate        = "receipt.duplicate"
	ReceiptSignatureInvalid = "receipt.signature_invalid"
	// ReceiptMismatch: a signed receipt named a message of another provider,
	// or another send's provider id; it changed nothing.
	ReceiptMismatch = "receipt.mismatch"
)

// Consent (package consent and the send path).
const (
	// ConsentOptedOut: an address was put on a workspace's suppression
	// list; source = keyword | provider | unsubscribe | api.
	ConsentOptedOut = "consent.opted_out"
	// ConsentOptedIn: an address was taken off it (START, DELETE).
	ConsentOptedIn = "consent.opted_in"
	// ConsentHelp: an inbound HELP/INFO was recorded.
	ConsentHelp = "consent.help"
	// ConsentReplySent / ConsentReplyFailed: the one confirmation reply
	// to a keyword.
	ConsentReplySent   = "consent.reply_sent"
	ConsentReplyFailed = "consent.reply_failed"
	// Suppressed: a send to a suppressed recipient was refused before
	// any provider call; its message is final with status suppressed.
	Suppressed = "message.api.suppressed"
)
