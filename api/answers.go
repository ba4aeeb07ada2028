package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/workspace"
)

// HeaderAnswerProfile chooses a request's answer profile (README: Answer
// profiles). Its value is a comma-separated list of a preset name and/or
// pending=<status> and refused=<status>, later items winning:
//
//	Msgapi-Answer-Profile: hubspot
//	Msgapi-Answer-Profile: pending=202, refused=422
//	Msgapi-Answer-Profile: zapier, pending=429
//
// What it leaves unsaid comes from the workspace's profile, then the
// server's defaults; "default" stands for the server's defaults.
const HeaderAnswerProfile = "Msgapi-Answer-Profile"

const ctxProfile = "msgapi.answerProfile"

// answerProfile resolves the request's profile (the header over the
// workspace's) before the Idempotency-Key layer, whose 409 it also decides.
func (s *Server) answerProfile(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := parseProfile(c.Request().Header.Values(HeaderAnswerProfile))
		if err != nil {
			return err
		}
		c.Set(ctxProfile, p.Over(currentWorkspace(c).AnswerProfile()))
		return next(c)
	}
}

func parseProfile(vals []string) (workspace.AnswerProfile, error) {
	var p workspace.AnswerProfile
	for _, v := range vals {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.ToLower(strings.TrimSpace(item))
			if item == "" {
				continue
			}
			name, val, isPair := strings.Cut(item, "=")
			if !isPair {
				pre, ok := workspace.Presets[name]
				if !ok {
					return p, badProfile(fmt.Sprintf("unknown preset %q (%s)", name, strings.Join(workspace.PresetNames(), ", ")))
				}
				p = pre
				continue
			}
			n, err := strconv.Atoi(strings.TrimSpace(val))
			switch strings.TrimSpace(name) {
			case "pending":
				if err != nil || !slices.Contains(workspace.PendingStatuses, n) {
					return p, badProfile(fmt.Sprintf("pending must be one of %v", workspace.PendingStatuses))
				}
				p.Pending = n
			case "refused":
				if err != nil || !slices.Contains(workspace.RefusedStatuses, n) {
					return p, badProfile(fmt.Sprintf("refused must be one of %v", workspace.RefusedStatuses))
				}
				p.Refused = n
			default:
				return p, badProfile(fmt.Sprintf("unknown member %q (pending, refused)", name))
			}
		}
	}
	return p, nil
}

func badProfile(msg string) error {
	return &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the " + HeaderAnswerProfile + " header is invalid: " + msg,
		Fields: []msgapi.FieldError{{Field: HeaderAnswerProfile, Message: msg}}}
}

func requestProfile(c echo.Context) workspace.AnswerProfile {
	p, _ := c.Get(ctxProfile).(workspace.AnswerProfile)
	return p
}

// answerStatus is the status of a, given the request's profile.
func answerStatus(c echo.Context, a msgapi.Answer) int {
	p := requestProfile(c)
	switch {
	case a.Pending && p.Pending != 0:
		return p.Pending
	case a.Refused && p.Refused >= 300:
		return p.Refused // a 2xx refusedStatus keeps the send's own 201 or 200
	}
	return a.Status
}

// inFlightStatus is the status of a 409 "Idempotency-Key in flight" under
// the request's profile: the profile's pending status when it is one the
// engines retry (429, 503), else 409.
func inFlightStatus(c echo.Context) int {
	if p := requestProfile(c).Pending; p == 429 || p == 503 {
		return p
	}
	return 409
}
