package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/sender"
	"github.com/msgapi/msgapi/workspace"
)

// setting is one configuration value: an environment variable, the flag
// that overrides it, and its default. This table is the only place settings
// are read, and the README's configuration table mirrors it.
type setting struct {
	env, flag, def, help string
	secret               bool
}

var settings = []setting{
	{"MSGAPI_ADDR", "addr", ":8080", "HTTP listen address", false},
	{"MONGODB_URI", "mongodb-uri", "", "MongoDB connection string; empty runs the embedded engine", true},
	{"MSGAPI_DATABASE", "database", "msgapi", "database name", false},
	{"MSGAPI_DATA_DIR", "data-dir", "./data", "embedded engine: data folder", false},
	{"MSGAPI_EMBEDDED_ADDR", "embedded-addr", "", "embedded engine: also serve the MongoDB protocol on this loopback TCP address (no authentication: any local process can connect); empty: the Unix socket alone", false},
	{"MSGAPI_EMBEDDED_SOCKET", "embedded-socket", "", "embedded engine: Unix socket path (ends in .sock, in a 0700 folder); empty: <data dir>/mongodb.sock", false},
	{"MSGAPI_STORE_TIMEOUT", "store-timeout", "10s", "how long start-up waits for the store before failing", false},
	{"MSGAPI_STORE_OP_TIMEOUT", "store-op-timeout", "5s", "deadline of every store call: a stalled store cannot hold a request longer", false},
	{"MSGAPI_ADMIN_TOKEN", "admin-token", "", "enables /admin/* with Authorization: Bearer <token>", true},
	{"MSGAPI_KEY_CACHE_TTL", "key-cache-ttl", "5s", "how long a process trusts what it read about an API key: a revoked key, a disabled workspace or a changed setting takes effect in every process within it (0 disables the cache)", false},
	{"MSGAPI_RATE_LIMIT", "rate-limit", "20", "POST /api/messages per workspace: requests a second (token bucket; 0: no limit unless the workspace has its own); per process unless MSGAPI_REDIS_URL is set", false},
	{"MSGAPI_RATE_BURST", "rate-burst", "40", "POST /api/messages per workspace: requests allowed at once above the rate", false},
	{"MSGAPI_DEFAULT_REGION", "default-region", "US", "region for phone numbers without a country code", false},
	{"MSGAPI_DEDUP_WINDOW", "dedup-window", "15m", "duplicate guard: same text to the same recipient within this window is sent once", false},
	{"MSGAPI_DEDUP_WAIT", "dedup-wait", "3s", "duplicate guard: how long a duplicate waits for the original's message", false},
	{"MSGAPI_DEDUP_LEASE", "dedup-lease", "30s", "duplicate guard: a lock whose message is not written after this is free (crashed winner)", false},
	{"MSGAPI_IDEMPOTENCY_TTL", "idempotency-ttl", "24h", "Idempotency-Key: how long a key replays, from its first request", false},
	{"MSGAPI_IDEMPOTENCY_LEASE", "idempotency-lease", "60s", "Idempotency-Key: an in-progress claim older than this is settled from its message (more than send timeout + dedup wait + store budget)", false},
	{"MSGAPI_SENDER_SMS", "sender-sms", "log", "sms provider: log | webhook | twilio", false},
	{"MSGAPI_SENDER_IMESSAGE", "sender-imessage", "log", "imessage provider: log | webhook", false},
	{"MSGAPI_SENDER_EMAIL", "sender-email", "log", "email provider: log | webhook | smtp", false},
	{"MSGAPI_LOG_SENDER_DELAY", "log-sender-delay", "0s", "log provider: imitated provider latency", false},
	{"MSGAPI_SEND_TIMEOUT", "send-timeout", "10s", "timeout of every provider call", false},
	{"MSGAPI_WEBHOOK_URL", "webhook-url", "", "webhook provider: relay URL", false},
	{"MSGAPI_WEBHOOK_SECRET", "webhook-secret", "", "webhook provider: Standard Webhooks signing secret, whsec_… or a legacy string", true},
	{"MSGAPI_TWILIO_ACCOUNT_SID", "twilio-account-sid", "", "twilio provider: account SID", false},
	{"MSGAPI_TWILIO_AUTH_TOKEN", "twilio-auth-token", "", "twilio provider: auth token", true},
	{"MSGAPI_TWILIO_FROM", "twilio-from", "", "twilio provider: sender number (E.164)", false},
	{"MSGAPI_TWILIO_MESSAGING_SERVICE_SID", "twilio-messaging-service-sid", "", "twilio provider: messaging service SID (instead of a from number)", false},
	{"MSGAPI_TWILIO_BASE_URL", "twilio-base-url", "https://api.twilio.com", "twilio provider: API base URL", false},
	{"MSGAPI_HUBSPOT_API_URL", "hubspot-api-url", "https://api.hubapi.com", "HubSpot custom action: API origin of the callback completions", false},
	{"MSGAPI_SMTP_HOST", "smtp-host", "", "smtp provider: server host", false},
	{"MSGAPI_SMTP_PORT", "smtp-port", "587", "smtp provider: server port", false},
	{"MSGAPI_SMTP_USERNAME", "smtp-username", "", "smtp provider: user name", false},
	{"MSGAPI_SMTP_PASSWORD", "smtp-password", "", "smtp provider: password", true},
	{"MSGAPI_SMTP_FROM", "smtp-from", "", "smtp provider: From address", false},
	{"MSGAPI_SMTP_TLS", "smtp-tls", "starttls", "smtp provider: starttls | tls | none", false},
	{"MSGAPI_SWEEP_INTERVAL", "sweep-interval", "30s", "outcome sweeper: how often messages still sending long after the send timeout are marked unknown (also at start-up)", false},
	{"MSGAPI_OUTCOME_MARGIN", "outcome-margin", "30s", "outcome sweeper: a message still sending this long after the send timeout lost its outcome", false},
	{"MSGAPI_DEDUP_ON_STORE_ERROR", "dedup-on-store-error", "send", "duplicate guard, when its lock cannot be written: send (unguarded, the send path never breaks) | refuse (503 with Retry-After)", false},
	{"MSGAPI_REAPER_INTERVAL", "reaper-interval", "1m", "how often expired locks and keys are deleted where the store has no TTL indexes (on the embedded engine, by its host only)", false},
	{"MSGAPI_SHUTDOWN_TIMEOUT", "shutdown-timeout", "60s", "how long shutdown waits for in-flight requests, provider calls and outcome writes (more than send timeout + dedup wait + store budget)", false},
	{"MSGAPI_LOG_LEVEL", "log-level", "info", "debug | info | warn | error", false},
	{"MSGAPI_LOG_FORMAT", "log-format", "auto", "auto | json | console: auto is console (human-readable) when stdout is a terminal, JSON otherwise; Loki always gets JSON", false},
	{"MSGAPI_TEST_CLOCK_OFFSET", "test-clock-offset", "0s", "TEST ONLY (refused unless MSGAPI_ENV=test): shifts the clock of the duplicate guard and the Idempotency-Key layer (test/chaos)", false},
	{"MSGAPI_TEST_UNFENCED", "test-unfenced", "", "TEST ONLY (refused unless MSGAPI_ENV=test): 1 disables the message-id fence, restoring the pre-fencing double sends (test/chaos -unfenced)", false},
	{"MSGAPI_ENV", "env", "production", "environment label on every event (Loki label env); production (the default) refuses plain-http provider and event URLs to other hosts and loopback event deliveries; development and test opt in to them", false},
	{"MSGAPI_LOKI_URL", "loki-url", "", "Loki push URL (e.g. http://loki:3100/loki/api/v1/push); empty: stdout only", false},
	{"MSGAPI_LOKI_BUFFER", "loki-buffer", "10000", "Loki: lines buffered while Loki is slow; past it the oldest lines are dropped and counted", false},
	{"MSGAPI_LOKI_BUFFER_BYTES", "loki-buffer-bytes", "16MiB", "Loki: bytes of lines buffered while Loki is slow (KiB, MiB suffixes); past it the oldest lines are dropped and counted", false},
	{"MSGAPI_PUBLIC_URL", "public-url", "", "inbound webhooks: the public origin vendors call (https://api.example.com), for Twilio's signature; empty: from the request (X-Forwarded-Proto/Host only from MSGAPI_TRUSTED_PROXIES)", false},
	{"MSGAPI_REDIS_URL", "redis-url", "", "inbound webhooks: Redis fast path, and rate limits shared by every process (redis://host:6379/0); empty: MongoDB alone, limits per process", true},
	{"MSGAPI_TRUSTED_PROXIES", "trusted-proxies", "", "inbound webhooks: comma-separated CIDRs or IPs of the proxies whose X-Forwarded-Proto/Host are believed (MSGAPI_PUBLIC_URL, when set, wins); empty: nobody's", false},
	{"MSGAPI_SECRET_KEY", "secret-key", "", "base64 of 32 random bytes (openssl rand -base64 32): encrypts workspace webhook secrets at rest (AES-256-GCM); empty: stored in clear", true},
	{"MSGAPI_SECRET_KEY_PREVIOUS", "secret-key-previous", "", "comma-separated older keys that still decrypt during a key rotation (msgapi secrets rotate)", true},
	{"MSGAPI_EVENTS_RETRY_SCHEDULE", "events-retry-schedule", "0s,5s,5m,30m,2h,5h,10h,10h", "event webhooks: delay before each delivery attempt (±20% jitter); its length is the number of attempts", false},
	{"MSGAPI_EVENTS_TIMEOUT", "events-timeout", "10s", "event webhooks: timeout of one delivery attempt", false},
	{"MSGAPI_EVENTS_WORKERS", "events-workers", "8", "event webhooks: delivery attempts running at once", false},
	{"MSGAPI_EVENTS_POLL_INTERVAL", "events-poll-interval", "1s", "event webhooks: how often the store is read for due deliveries (and for events other processes recorded)", false},
	{"MSGAPI_EVENTS_SLOW_RETRY", "events-slow-retry", "60s", "event webhooks: least delay after a timeout or a 429", false},
	{"MSGAPI_EVENTS_DISABLE_AFTER", "events-disable-after", "120h", "event webhooks: an endpoint with no success for this long, whose retries ran out, is disabled", false},
	{"MSGAPI_EVENTS_ALLOW_HTTP", "events-allow-http", "false", "event webhooks: allow http:// endpoint URLs on any host (development only)", false},
	{"MSGAPI_EGRESS_ALLOW", "egress-allow", "", "event webhooks: comma-separated CIDRs, addresses and host names msgapi may deliver to although they are private (your own receivers); cloud metadata addresses stay refused", false},
	{"MSGAPI_EGRESS_ALLOW_LOOPBACK", "egress-allow-loopback", "false", "event webhooks: let deliveries reach loopback addresses (and http:// to them); refused unless MSGAPI_ENV is development or test", false},
}

// values holds the resolved settings by environment name.
type values map[string]string

// loadValues resolves each setting: default, then environment, then flag.
// Flags may come before, between or after the arguments (msgapi workspace
// create Acme -database x); "--" ends the flags. It returns the arguments
// in order. -h prints the help of the command among args (msgapi's
// overview if none) to out and returns flag.ErrHelp.
func loadValues(name string, args []string, getenv func(string) string, out io.Writer) (values, []string, error) {
	all := args
	v := values{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, the usage is printed for -h only
	fs.Usage = func() {}
	ptrs := map[string]*string{}
	for _, s := range settings {
		def := s.def
		if e := getenv(s.env); e != "" {
			def = e
		}
		ptrs[s.env] = fs.String(s.flag, def, s.help+" ($"+s.env+")")
	}
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				commandHelp(out, helpTopic(all))
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%w (msgapi -h lists the flags)", err)
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		// flag.Parse stops at the first argument, or just after "--".
		if consumed := args[:len(args)-len(left)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			rest = append(rest, left...)
			break
		}
		rest, args = append(rest, left[0]), left[1:]
	}
	for env, p := range ptrs {
		v[env] = *p
	}
	return v, rest, nil
}

func (v values) str(k string) string { return strings.TrimSpace(v[k]) }

func (v values) dur(k string, errs *[]string) time.Duration {
	d, err := time.ParseDuration(v.str(k))
	if err != nil || d < 0 {
		*errs = append(*errs, fmt.Sprintf("%s=%q is not a duration (e.g. 30s, 15m)", k, v[k]))
	}
	return d
}

func (v values) int(k string, errs *[]string) int {
	n, err := strconv.Atoi(v.str(k))
	if err != nil || n < 0 {
		*errs = append(*errs, fmt.Sprintf("%s=%q is not a non-negative integer", k, v[k]))
	}
	return n
}

// bytes reads a size: a whole number of bytes, or with a KiB or MiB suffix.
func (v values) bytes(k string, errs *[]string) int {
	s, mul := v.str(k), 1
	if n, ok := strings.CutSuffix(s, "KiB"); ok {
		s, mul = n, 1<<10
	} else if n, ok := strings.CutSuffix(s, "MiB"); ok {
		s, mul = n, 1<<20
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > (1<<40)/mul {
		*errs = append(*errs, fmt.Sprintf("%s=%q is not a size (e.g. 16MiB, 512KiB, 1048576)", k, v[k]))
		return 0
	}
	return n * mul
}

// durs parses a comma-separated list of durations.
func (v values) durs(k string, errs *[]string) []time.Duration {
	var out []time.Duration
	for _, p := range strings.Split(v.str(k), ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d < 0 {
			*errs = append(*errs, fmt.Sprintf("%s=%q is not a comma-separated list of durations (e.g. 0s,5s,5m)", k, v[k]))
			return nil
		}
		out = append(out, d)
	}
	return out
}

func (v values) bool(k string, errs *[]string) bool {
	b, err := strconv.ParseBool(v.str(k))
	if err != nil {
		*errs = append(*errs, fmt.Sprintf("%s=%q is not true or false", k, v[k]))
	}
	return b
}

// config is the parsed, validated settings.
type config struct {
	v               values
	addr            string
	storeTimeout    time.Duration
	storeOpTimeout  time.Duration
	keyCacheTTL     time.Duration
	dedupWindow     time.Duration
	dedupWait       time.Duration
	dedupLease      time.Duration
	idemTTL         time.Duration
	idemLease       time.Duration
	logSenderDelay  time.Duration
	sendTimeout     time.Duration
	reaperInterval  time.Duration
	sweepInterval   time.Duration
	outcomeMargin   time.Duration
	shutdownTimeout time.Duration
	smtpPort        int
	lokiBuffer      int
	lokiBufferBytes int
	adminToken      string           // trimmed; "" disables /admin/*
	keyring         *secrets.Keyring // nil: secrets stored in clear
	proxies         []netip.Prefix   // MSGAPI_TRUSTED_PROXIES
	rateLimit       ratelimit.Limit
	events          notify.Options
	// unsubscribe makes the one-click unsubscribe URL of an email (nil:
	// no MSGAPI_PUBLIC_URL, so emails carry no List-Unsubscribe).
	unsubscribe func(m sender.Message) (string, error)
	// Test-only switches (MSGAPI_ENV=test): see testClock and
	// MSGAPI_TEST_UNFENCED.
	testClockOffset time.Duration
	testUnfenced    bool
}

func parseConfig(v values) (config, error) {
	var errs []string
	c := config{
		v:               v,
		addr:            v.str("MSGAPI_ADDR"),
		storeTimeout:    v.dur("MSGAPI_STORE_TIMEOUT", &errs),
		storeOpTimeout:  v.dur("MSGAPI_STORE_OP_TIMEOUT", &errs),
		keyCacheTTL:     v.dur("MSGAPI_KEY_CACHE_TTL", &errs),
		dedupWindow:     v.dur("MSGAPI_DEDUP_WINDOW", &errs),
		dedupWait:       v.dur("MSGAPI_DEDUP_WAIT", &errs),
		dedupLease:      v.dur("MSGAPI_DEDUP_LEASE", &errs),
		idemTTL:         v.dur("MSGAPI_IDEMPOTENCY_TTL", &errs),
		idemLease:       v.dur("MSGAPI_IDEMPOTENCY_LEASE", &errs),
		logSenderDelay:  v.dur("MSGAPI_LOG_SENDER_DELAY", &errs),
		sendTimeout:     v.dur("MSGAPI_SEND_TIMEOUT", &errs),
		reaperInterval:  v.dur("MSGAPI_REAPER_INTERVAL", &errs),
		sweepInterval:   v.dur("MSGAPI_SWEEP_INTERVAL", &errs),
		outcomeMargin:   v.dur("MSGAPI_OUTCOME_MARGIN", &errs),
		shutdownTimeout: v.dur("MSGAPI_SHUTDOWN_TIMEOUT", &errs),
		smtpPort:        v.int("MSGAPI_SMTP_PORT", &errs),
		lokiBuffer:      v.int("MSGAPI_LOKI_BUFFER", &errs),
		lokiBufferBytes: v.bytes("MSGAPI_LOKI_BUFFER_BYTES", &errs),
		rateLimit:       ratelimit.Limit{PerSecond: v.int("MSGAPI_RATE_LIMIT", &errs), Burst: v.int("MSGAPI_RATE_BURST", &errs)},
		events: notify.Options{
			Schedule:     v.durs("MSGAPI_EVENTS_RETRY_SCHEDULE", &errs),
			Timeout:      v.dur("MSGAPI_EVENTS_TIMEOUT", &errs),
			Workers:      v.int("MSGAPI_EVENTS_WORKERS", &errs),
			PollInterval: v.dur("MSGAPI_EVENTS_POLL_INTERVAL", &errs),
			SlowRetry:    v.dur("MSGAPI_EVENTS_SLOW_RETRY", &errs),
			DisableAfter: v.dur("MSGAPI_EVENTS_DISABLE_AFTER", &errs),
			AllowHTTP:    v.bool("MSGAPI_EVENTS_ALLOW_HTTP", &errs),
		},
	}
	if c.lokiBufferBytes > 0 && c.lokiBufferBytes < 64<<10 {
		errs = append(errs, "MSGAPI_LOKI_BUFFER_BYTES must be at least 64KiB (four of the longest lines)")
	}
	if c.rateLimit.PerSecond > 0 && c.rateLimit.Burst < 1 {
		errs = append(errs, "MSGAPI_RATE_BURST must be at least 1 when MSGAPI_RATE_LIMIT is set")
	}
	// A clock offset may be negative (a clock behind the others).
	if d, err := time.ParseDuration(v.str("MSGAPI_TEST_CLOCK_OFFSET")); err != nil {
		errs = append(errs, fmt.Sprintf("MSGAPI_TEST_CLOCK_OFFSET=%q is not a duration (e.g. 5s, -5s)", v["MSGAPI_TEST_CLOCK_OFFSET"]))
	} else {
		c.testClockOffset = d
	}
	switch u := v.str("MSGAPI_TEST_UNFENCED"); u {
	case "", "0":
	case "1":
		c.testUnfenced = true
	default:
		errs = append(errs, fmt.Sprintf("MSGAPI_TEST_UNFENCED=%q is not 1, 0 or empty", u))
	}
	// The test switches break the guarantees on purpose (test/chaos): a
	// deployment that set one by mistake must not start.
	if (c.testClockOffset != 0 || c.testUnfenced) && v.str("MSGAPI_ENV") != "test" {
		errs = append(errs, "MSGAPI_TEST_CLOCK_OFFSET and MSGAPI_TEST_UNFENCED are for tests only: they are refused unless MSGAPI_ENV=test")
	}
	for _, k := range []string{"MSGAPI_DEDUP_WINDOW", "MSGAPI_DEDUP_LEASE", "MSGAPI_IDEMPOTENCY_TTL", "MSGAPI_IDEMPOTENCY_LEASE", "MSGAPI_SEND_TIMEOUT", "MSGAPI_REAPER_INTERVAL", "MSGAPI_STORE_OP_TIMEOUT", "MSGAPI_SWEEP_INTERVAL",
		"MSGAPI_EVENTS_TIMEOUT", "MSGAPI_EVENTS_POLL_INTERVAL", "MSGAPI_EVENTS_DISABLE_AFTER"} {
		if d, err := time.ParseDuration(v.str(k)); err == nil && d == 0 {
			errs = append(errs, k+" must be greater than 0")
		}
	}
	// A request holds its Idempotency-Key, and shutdown waits for it, for
	// as long as it can run: the dedup wait, the provider call and its
	// store calls. A shorter lease would let a retry settle a live
	// request's key; a shorter shutdown would cut provider calls off.
	if len(errs) == 0 {
		longest := c.requestBudget()
		if c.idemLease <= longest {
			errs = append(errs, fmt.Sprintf("MSGAPI_IDEMPOTENCY_LEASE=%s must exceed send timeout + dedup wait + store budget (%s)", c.idemLease, longest))
		}
		if c.shutdownTimeout <= longest {
			errs = append(errs, fmt.Sprintf("MSGAPI_SHUTDOWN_TIMEOUT=%s must exceed send timeout + dedup wait + store budget (%s)", c.shutdownTimeout, longest))
		}
	}
	if c.events.Workers == 0 {
		errs = append(errs, "MSGAPI_EVENTS_WORKERS must be greater than 0")
	}
	if m := v.str("MSGAPI_DEDUP_ON_STORE_ERROR"); m != "send" && m != "refuse" {
		errs = append(errs, fmt.Sprintf("MSGAPI_DEDUP_ON_STORE_ERROR=%q is not one of send, refuse", m))
	}
	securitySettings(v, &c, &errs)
	egressSettings(v, &c, &errs)
	if _, err := zerolog.ParseLevel(v.str("MSGAPI_LOG_LEVEL")); err != nil {
		errs = append(errs, fmt.Sprintf("MSGAPI_LOG_LEVEL=%q is not one of debug, info, warn, error", v["MSGAPI_LOG_LEVEL"]))
	}
	if f := v.str("MSGAPI_LOG_FORMAT"); !slices.Contains(logFormats, f) {
		errs = append(errs, fmt.Sprintf("MSGAPI_LOG_FORMAT=%q is not one of auto, json, console", f))
	}
	if len(errs) > 0 {
		return config{}, fmt.Errorf("invalid settings:\n  %s", strings.Join(errs, "\n  "))
	}
	return c, nil
}

// testClock is the clock of the duplicate guard and the Idempotency-Key
// layer: the wall clock, shifted by MSGAPI_TEST_CLOCK_OFFSET in tests.
func (c config) testClock() func() time.Time {
	if c.testClockOffset == 0 {
		return time.Now
	}
	return func() time.Time { return time.Now().Add(c.testClockOffset) }
}

// storeCallsPerSend bounds the store calls one send makes outside its dedup
// wait (lock, lead, conversation, message, outcome, key completion), each
// within MSGAPI_STORE_OP_TIMEOUT: the store budget of a request.
const storeCallsPerSend = 6

// requestBudget is the longest a send request can run.
func (c config) requestBudget() time.Duration {
	// A workspace may wait up to workspace.MaxDedupWait (PATCH settings).
	return c.sendTimeout + max(c.dedupWait, workspace.MaxDedupWait) + storeCallsPerSend*c.storeOpTimeout
}
