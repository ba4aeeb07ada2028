// Package vendorsig checks the signatures vendors put on the calls they make
// to msgapi: Slack's v0 signing secret (with its 5-minute timestamp
// tolerance), Twilio's X-Twilio-Signature over the URL it called and the
// form, Telegram's secret token, and the email relay's Standard Webhooks
// signature (or its deprecated X-Msgapi-Signature). Inbound webhooks
// (package inbound) and delivery receipts (package receipts) both use it;
// RequestURL is the URL a vendor signed, as seen behind trusted proxies.
//
// Each check returns "" for a valid call or a short reason for the log;
// every comparison is constant-time.
package vendorsig

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/msgapi/msgapi/stdwebhook"
)

// SlackTolerance is how far a Slack request timestamp may be from now.
const SlackTolerance = 5 * time.Minute

// HeaderRelaySignature is the email relay's retired signature header
// (X-Msgapi-Signature: an HMAC of the body without a timestamp, so a
// captured call replayed forever). A call signed only with it is refused
// (RetiredRelay).
const HeaderRelaySignature = headerRelaySignature

// Signature headers.
const (
	headerSlackSignature    = "X-Slack-Signature"
	headerSlackTimestamp    = "X-Slack-Request-Timestamp"
	headerTwilioSignature   = "X-Twilio-Signature"
	headerTelegramSecret    = "X-Telegram-Bot-Api-Secret-Token"
	headerRelaySignature    = "X-Msgapi-Signature"
	slackVersion            = "v0"
	reasonMissing           = "signature header missing"
	reasonMalformed         = "signature header malformed"
	reasonMismatch          = "signature does not match"
	reasonRetired           = "X-Msgapi-Signature is retired: sign with Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature)"
	reasonStale             = "timestamp outside the 5-minute tolerance"
	reasonTimestampMissing  = "timestamp header missing or not a number"
	reasonTwilioContentType = "twilio signature needs a form body"
	reasonStandardMissing   = "webhook-id, webhook-timestamp or webhook-signature header missing"
	reasonBadSecret         = "the workspace's secret for this channel is not a usable whsec_ secret"
)

// Slack: v0=hex(HMAC-SHA256(secret, "v0:{timestamp}:{body}")), and the
// timestamp within SlackTolerance of now (a captured request cannot be
// replayed later).
func Slack(secret string, hd http.Header, body []byte, now time.Time) string {
	sig := hd.Get(headerSlackSignature)
	if sig == "" {
		return reasonMissing
	}
	ts := hd.Get(headerSlackTimestamp)
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return reasonTimestampMissing
	}
	if d := now.Sub(time.Unix(secs, 0)); d > SlackTolerance || d < -SlackTolerance {
		return reasonStale
	}
	hexSig, ok := strings.CutPrefix(sig, slackVersion+"=")
	if !ok {
		return reasonMalformed
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return reasonMalformed
	}
	if !hmac.Equal(got, SlackSignature(secret, ts, body)) {
		return reasonMismatch
	}
	return ""
}

// IsMismatch reports whether reason is a MAC that does not match (every
// header present and well-formed, the timestamp fresh).
func IsMismatch(reason string) bool { return reason == reasonMismatch }

// TwilioHeader is the part of the Twilio check that needs no body: the
// signature header is present and is base64 of a SHA-1 MAC.
func TwilioHeader(hd http.Header) string {
	sig := hd.Get(headerTwilioSignature)
	if sig == "" {
		return reasonMissing
	}
	if b, err := base64.StdEncoding.DecodeString(sig); err != nil || len(b) != sha1.Size {
		return reasonMalformed
	}
	return ""
}

// SlackSignature is the raw v0 MAC of a Slack request.
func SlackSignature(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(slackVersion + ":" + timestamp + ":"))
	m.Write(body)
	return m.Sum(nil)
}

// Twilio: base64(HMAC-SHA1(auth token, URL + each POST parameter,
// sorted by name, as name+value)). Like Twilio's own validators, the URL is
// also tried with its default port added or removed, because Twilio signs
// whichever form was configured and proxies disagree about ports.
func Twilio(secret string, hd http.Header, rawURL string, body []byte) string {
	sig := hd.Get(headerTwilioSignature)
	if sig == "" {
		return reasonMissing
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return reasonMalformed
	}
	if !IsForm(hd.Get("Content-Type")) {
		return reasonTwilioContentType
	}
	params, err := url.ParseQuery(string(body))
	if err != nil {
		return reasonMalformed
	}
	match := 0
	for _, u := range urlVariants(rawURL) {
		// Every variant is computed and compared, so timing does not say
		// which one matched.
		match |= subtle.ConstantTimeCompare(got, TwilioSignature(secret, u, params))
	}
	if match != 1 {
		return reasonMismatch
	}
	return ""
}

// TwilioValid reports whether a form POST to fullURL carries a valid
// X-Twilio-Signature for authToken (delivery receipts use it too).
func TwilioValid(authToken string, hd http.Header, fullURL string, body []byte) bool {
	return authToken != "" && Twilio(authToken, hd, fullURL, body) == ""
}

// TwilioSignature is the raw MAC Twilio sends (base64-encoded) for a form
// POST to fullURL. Repeated parameters contribute each distinct value in
// sorted order, as Twilio's validators do.
func TwilioSignature(secret, fullURL string, params url.Values) []byte {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(fullURL))
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		vals := append([]string(nil), params[k]...)
		sort.Strings(vals)
		for i, v := range vals {
			if i > 0 && v == vals[i-1] {
				continue
			}
			m.Write([]byte(k))
			m.Write([]byte(v))
		}
	}
	return m.Sum(nil)
}

// urlVariants is rawURL as given, and with its scheme's default port
// removed or added.
func urlVariants(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return []string{rawURL}
	}
	def := map[string]string{"https": "443", "http": "80"}[u.Scheme]
	if def == "" {
		return []string{rawURL}
	}
	host, port, err := net.SplitHostPort(u.Host)
	alt := *u
	switch {
	case err != nil: // no port: add the default
		alt.Host = net.JoinHostPort(u.Host, def)
	case port == def:
		alt.Host = host
		if strings.Contains(host, ":") {
			alt.Host = "[" + host + "]"
		}
	default:
		return []string{rawURL}
	}
	return []string{rawURL, alt.String()}
}

// Telegram: the secret_token given to setWebhook, sent verbatim.
// Both sides are hashed first so the comparison does not leak the length.
func Telegram(secret string, hd http.Header) string {
	got := hd.Get(headerTelegramSecret)
	if got == "" {
		return reasonMissing
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return reasonMismatch
	}
	return ""
}

// UsesStandard reports whether a call is signed under Standard Webhooks. Any
// one of its headers selects it, so a call cannot fall back to the weaker
// legacy scheme by sending a bad standard signature next to a legacy one.
func UsesStandard(hd http.Header) bool {
	return hd.Get(stdwebhook.HeaderSignature) != "" || hd.Get(stdwebhook.HeaderID) != "" || hd.Get(stdwebhook.HeaderTimestamp) != ""
}

// Standard: the relay signs as msgapi's own webhook provider does
// (package stdwebhook), with the workspace's email secret: whsec_ + base64
// of the key, or a legacy string whose UTF-8 bytes are the key.
func Standard(secret string, hd http.Header, body []byte, now time.Time) string {
	key, err := stdwebhook.ParseSecret(secret)
	if err != nil {
		return reasonBadSecret
	}
	err = stdwebhook.Verify(key, hd, body, now, stdwebhook.Tolerance)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, stdwebhook.ErrMissingHeaders):
		return reasonStandardMissing
	case errors.Is(err, stdwebhook.ErrBadTimestamp):
		return reasonTimestampMissing
	case errors.Is(err, stdwebhook.ErrStale):
		return reasonStale
	}
	return reasonMismatch
}

// RetiredRelay is the refusal of an email relay call signed only with the
// retired X-Msgapi-Signature ("" when the call does not use it).
func RetiredRelay(hd http.Header) string {
	if hd.Get(headerRelaySignature) == "" {
		return ""
	}
	return reasonRetired
}

// IsForm reports whether contentType is a form body
// (application/x-www-form-urlencoded).
func IsForm(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/x-www-form-urlencoded")
}

// RequestURL is the URL a vendor called: publicBase ("https://api.example.com")
// when set, else the scheme and host the client saw — X-Forwarded-Proto and
// X-Forwarded-Host only from a peer in proxies, and then the value the
// outermost trusted proxy added, never one the client sent — plus the request URI
// exactly as sent.
func RequestURL(r *http.Request, publicBase string, proxies []netip.Prefix) string {
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	if publicBase != "" {
		return strings.TrimRight(publicBase, "/") + uri
	}
	var scheme, host string
	if trustedPeer(r, proxies) {
		hops := trustedHops(r.Header, proxies)
		scheme = forwarded(r.Header, "X-Forwarded-Proto", hops)
		host = forwarded(r.Header, "X-Forwarded-Host", hops)
	}
	if scheme == "" {
		scheme = "http"
		if r.TLS != nil {
			scheme = "https"
		}
	}
	if host == "" {
		host = r.Host
	}
	return (&url.URL{Scheme: strings.ToLower(scheme), Host: host}).String() + uri
}

// trustedPeer reports whether the connection comes from a trusted proxy.
func trustedPeer(r *http.Request, proxies []netip.Prefix) bool {
	if len(proxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	return inAny(ap.Addr().Unmap(), proxies)
}

func inAny(ip netip.Addr, proxies []netip.Prefix) bool {
	for _, p := range proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseProxies reads a comma-separated list of CIDRs or single addresses
// (MSGAPI_TRUSTED_PROXIES).
func ParseProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an IP address", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// A proxy that forwards a request appends its own value to each
// X-Forwarded-* header (after whatever arrived with the request), so the
// values a client sent come first and can be anything. The value to believe
// is the one the outermost trusted proxy added: the hops-th from the right,
// where hops counts the trusted proxies the request passed (the peer, plus
// each trusted address at the right end of X-Forwarded-For). A proxy that
// replaces the header instead leaves one value, which is then the answer.

// trustedHops is 1 (the trusted peer) plus the trusted proxies named at the
// right end of X-Forwarded-For, up to the first address that is not one.
func trustedHops(h http.Header, proxies []netip.Prefix) int {
	hops := 1
	chain := headerValues(h, "X-Forwarded-For")
	for i := len(chain) - 1; i >= 0; i-- {
		ip, err := netip.ParseAddr(chain[i])
		if err != nil || !inAny(ip.Unmap(), proxies) {
			break
		}
		hops++
	}
	return hops
}

// forwarded is the value of header that the outermost of hops trusted
// proxies added ("" without one). Fewer values than hops: the first (some
// trusted proxies did not append; nothing before them came from a client
// that a trusted proxy did not also see).
func forwarded(h http.Header, header string, hops int) string {
	vals := headerValues(h, header)
	if len(vals) == 0 {
		return ""
	}
	return vals[max(0, len(vals)-hops)]
}

// headerValues is every comma-separated value of every line of header, in
// order, trimmed.
func headerValues(h http.Header, header string) []string {
	var out []string
	for _, line := range h.Values(header) {
		for _, v := range strings.Split(line, ",") {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}
