package workspace

import (
	"slices"
	"strings"
)

// AnswerProfile says which HTTP status a caller gets for the two answers
// whose default (a 2xx) a workflow engine reads as "done" (SPEC: Callers):
// the "still in flight" answer and a send that reached no one by a definite
// refusal. Engines act on status codes only, so the status is chosen for
// the engine that receives it. A zero field means the server's default.
type AnswerProfile struct {
	// Pending is the status of the "still in flight" answer: 200 (the
	// default), 202, 409, 429 or 503. A 409 of an Idempotency-Key still in
	// flight becomes this status too when it is 429 or 503, the statuses
	// the engines retry.
	Pending int
	// Refused is the status of an answer whose message reached no one by a
	// definite refusal (failed, suppressed): a 2xx (the default: the send's
	// own 201 or 200), 422 or 424.
	Refused int
}

// PendingStatuses and RefusedStatuses are the allowed values.
var (
	PendingStatuses = []int{200, 202, 409, 429, 503}
	RefusedStatuses = []int{200, 201, 422, 424}
)

// Presets are the named profiles, one per engine (README: Callers, for
// each engine's documented retry rules). "default" is the server's
// behaviour, for a request that wants to ignore its workspace's profile.
var Presets = map[string]AnswerProfile{
	"default": {Pending: 200, Refused: 200},
	// HubSpot retries 429 honouring Retry-After, never another 4xx.
	"hubspot": {Pending: 429, Refused: 422},
	// HighLevel documents retrying 429 only.
	"highlevel": {Pending: 429, Refused: 422},
	// Make retries rate-limit errors by itself once the scenario stores
	// incomplete executions; Zapier Autoreplay and n8n's Retry On Fail
	// retry any error, where 503 says "not done yet, come back". 422 says
	// "will not happen" to all three.
	"make":   {Pending: 429, Refused: 422},
	"zapier": {Pending: 503, Refused: 422},
	"n8n":    {Pending: 503, Refused: 422},
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var out []string
	for n := range Presets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Over returns p with every zero field taken from base.
func (p AnswerProfile) Over(base AnswerProfile) AnswerProfile {
	if p.Pending == 0 {
		p.Pending = base.Pending
	}
	if p.Refused == 0 {
		p.Refused = base.Refused
	}
	return p
}

// AnswerProfile is the workspace's profile: its own pendingStatus and
// refusedStatus over its preset; zero fields are the server's defaults.
func (w Workspace) AnswerProfile() AnswerProfile {
	own := AnswerProfile{Pending: w.Settings.PendingStatus, Refused: w.Settings.RefusedStatus}
	return own.Over(Presets[w.Settings.AnswerProfile])
}

func presetList() string { return strings.Join(PresetNames(), ", ") }
