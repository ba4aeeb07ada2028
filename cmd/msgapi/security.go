package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/egress"
	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/vendorsig"
	"github.com/msgapi/msgapi/workspace"
)

// minAdminToken is the shortest admin token start-up accepts.
const minAdminToken = 16

// securitySettings reads the settings that guard secrets, each trimmed of
// surrounding white space as a presented bearer token is, and appends what
// is wrong with them to errs without ever quoting a secret.
func securitySettings(v values, c *config, errs *[]string) {
	if raw := v["MSGAPI_ADMIN_TOKEN"]; raw != "" {
		tok := v.str("MSGAPI_ADMIN_TOKEN")
		if n := utf8.RuneCountInString(tok); n < minAdminToken {
			*errs = append(*errs, fmt.Sprintf("MSGAPI_ADMIN_TOKEN is %d characters (after trimming white space); use at least %d, e.g. openssl rand -hex 32", n, minAdminToken))
		}
		c.adminToken = tok
	}
	kr, err := secrets.NewKeyring(v.str("MSGAPI_SECRET_KEY"), strings.Split(v.str("MSGAPI_SECRET_KEY_PREVIOUS"), ","))
	if err != nil {
		*errs = append(*errs, err.Error())
	}
	c.keyring = kr
	proxies, err := vendorsig.ParseProxies(v.str("MSGAPI_TRUSTED_PROXIES"))
	if err != nil {
		*errs = append(*errs, "MSGAPI_TRUSTED_PROXIES: "+err.Error())
	}
	c.proxies = proxies
	if a := v.str("MSGAPI_EMBEDDED_ADDR"); a != "" {
		if err := store.LoopbackTCP(a); err != nil {
			*errs = append(*errs, err.Error())
		}
	}
}

// egressSettings builds the dialer of event deliveries: the operator's
// allowlist, and loopback only on an explicit opt-in outside production.
func egressSettings(v values, c *config, errs *[]string) {
	prefixes, hosts, err := egress.ParseAllow(v.str("MSGAPI_EGRESS_ALLOW"))
	if err != nil {
		*errs = append(*errs, "MSGAPI_EGRESS_ALLOW: "+err.Error())
	}
	loopback := v.bool("MSGAPI_EGRESS_ALLOW_LOOPBACK", errs)
	if env := v.str("MSGAPI_ENV"); loopback && env != "development" && env != "test" {
		*errs = append(*errs, fmt.Sprintf("MSGAPI_EGRESS_ALLOW_LOOPBACK=true lets any workspace make msgapi call this host's own services: refused with MSGAPI_ENV=%q (only development or test)", env))
	}
	if c.events.AllowHTTP && v.str("MSGAPI_ENV") != "development" && v.str("MSGAPI_ENV") != "test" {
		*errs = append(*errs, "MSGAPI_EVENTS_ALLOW_HTTP=true sends events in clear text: refused unless MSGAPI_ENV is development or test")
	}
	c.events.Egress = egress.New(egress.Options{Allow: prefixes, AllowHosts: hosts, AllowLoopback: loopback, Timeout: c.events.Timeout})
}

// checkProviderURL refuses an http:// provider URL, which would carry
// credentials and recipients' data in clear text, outside development; in
// development, and always for a loopback host (local relays and tests), it
// is allowed with a warning.
func checkProviderURL(setting, raw, env string, log zerolog.Logger) error {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return nil // https, or an error the provider reports itself
	}
	loopback := u.Hostname() == "localhost"
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		loopback = ip.Unmap().IsLoopback()
	}
	host := u.Hostname()
	if u.Port() != "" {
		host = net.JoinHostPort(u.Hostname(), u.Port())
	}
	switch {
	case loopback:
		log.Warn().Str("setting", setting).Str("host", host).Msg("provider URL is plain http to a loopback address: fine for a local relay or a test, never across a network")
	case env == "development":
		log.Warn().Str("setting", setting).Str("host", host).Msg("PROVIDER URL IS PLAIN HTTP: credentials and recipients' data cross the network in clear text; refused outside MSGAPI_ENV=development — use https")
	default:
		return fmt.Errorf("%s is plain http:// to %s: credentials and recipients' data would cross the network in clear text; use https:// (http is allowed only to loopback, or with MSGAPI_ENV=development)", setting, host)
	}
	return nil
}

// checkStoredSecrets runs at start-up: secrets this process could not open
// stop it with an error that says which key is missing, instead of every
// webhook of those workspaces failing later; stale ones are reported.
func checkStoredSecrets(ctx context.Context, ws *workspace.Store, ob *notify.Outbox, kr *secrets.Keyring, log zerolog.Logger) error {
	if !kr.Enabled() {
		log.Warn().Msg("MSGAPI_SECRET_KEY is not set: workspace webhook secrets (Twilio auth tokens, Slack signing secrets, event endpoint whsec_ secrets, …) are stored IN CLEAR in the database; set it to encrypt them (README: Security)")
	}
	rep, err := ws.CheckSecrets(ctx)
	if err != nil {
		return fmt.Errorf("check stored secrets: %w", err)
	}
	eps, err := ob.CheckSecrets(ctx)
	if err != nil {
		return fmt.Errorf("check stored endpoint secrets: %w", err)
	}
	rep.Clear += eps.Clear
	for id, n := range eps.ByKey {
		rep.ByKey[id] += n
	}
	for _, id := range eps.Unreadable {
		if !slices.Contains(rep.Unreadable, id) {
			rep.Unreadable = append(rep.Unreadable, id)
		}
	}
	slices.Sort(rep.Unreadable)
	if len(rep.Unreadable) > 0 {
		hint := "set MSGAPI_SECRET_KEY to the key they were encrypted with"
		if kr.Enabled() {
			hint = "add the key they were encrypted with to MSGAPI_SECRET_KEY_PREVIOUS"
		}
		return fmt.Errorf("stored workspace secrets are encrypted with key id(s) %s, which this process does not have: %s", strings.Join(rep.Unreadable, ", "), hint)
	}
	if kr.Enabled() {
		log.Info().Str("keyId", kr.CurrentID()).Msg("workspace webhook secrets are encrypted at rest (AES-256-GCM)")
		if n := rep.Stale(kr.CurrentID()); n > 0 {
			log.Warn().Int("secrets", n).Int("inClear", rep.Clear).Msg("some stored secrets are in clear or under a previous key: run `msgapi secrets rotate`")
		}
	}
	return nil
}
