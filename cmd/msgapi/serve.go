package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/api"
	"github.com/msgapi/msgapi/app"
	"github.com/msgapi/msgapi/consent"
	"github.com/msgapi/msgapi/events/loki"
	"github.com/msgapi/msgapi/guard"
	"github.com/msgapi/msgapi/hubspot"
	"github.com/msgapi/msgapi/idempotency"
	"github.com/msgapi/msgapi/inbound"
	"github.com/msgapi/msgapi/logcap"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/metrics"
	"github.com/msgapi/msgapi/notify"
	"github.com/msgapi/msgapi/ratelimit"
	"github.com/msgapi/msgapi/receipts"
	"github.com/msgapi/msgapi/send"
	"github.com/msgapi/msgapi/sender"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/workspace"
)

func newLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("app", "msgapi").Logger()
}

func openStore(ctx context.Context, c config, log zerolog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, store.Options{
		URI:            c.v.str("MONGODB_URI"),
		Database:       c.v.str("MSGAPI_DATABASE"),
		DataDir:        c.v.str("MSGAPI_DATA_DIR"),
		EmbeddedAddr:   c.v.str("MSGAPI_EMBEDDED_ADDR"),
		EmbeddedSocket: c.v.str("MSGAPI_EMBEDDED_SOCKET"),
		ConnectTimeout: c.storeTimeout,
		OpTimeout:      c.storeOpTimeout,
		Log:            log,
	})
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeout(ctx, c.storeTimeout+20*time.Second)
	defer cancel()
	if err := st.Ensure(ectx, app.Collections()...); err != nil {
		_ = st.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create collections and indexes: %w", err)
	}
	return st, nil
}

// buildSenders picks each channel's provider from the settings.
func buildSenders(c config, log zerolog.Logger) (map[string]send.Sender, error) {
	v := c.v
	out := map[string]send.Sender{}
	allowed := map[string][]string{"sms": {"log", "webhook", "twilio"}, "imessage": {"log", "webhook"}, "email": {"log", "webhook", "smtp"}}
	for _, ch := range []string{"sms", "imessage", "email"} {
		env := "MSGAPI_SENDER_" + strings.ToUpper(ch)
		name := v.str(env)
		ok := false
		for _, a := range allowed[ch] {
			ok = ok || a == name
		}
		if !ok {
			return nil, fmt.Errorf("%s=%q: choose one of %s", env, name, strings.Join(allowed[ch], ", "))
		}
		var (
			s   send.Sender
			err error
		)
		switch name {
		case "log":
			s = sender.NewLog(log, c.logSenderDelay)
			log.Warn().Str("channel", ch).Msg("the log sender is active for this channel: messages are recorded as sent and NO real message leaves this server")
		case "webhook":
			if err := checkProviderURL("MSGAPI_WEBHOOK_URL", v.str("MSGAPI_WEBHOOK_URL"), v.str("MSGAPI_ENV"), log); err != nil {
				return nil, err
			}
			s, err = sender.NewWebhook(sender.WebhookOptions{URL: v.str("MSGAPI_WEBHOOK_URL"), Secret: v.str("MSGAPI_WEBHOOK_SECRET"), Timeout: c.sendTimeout})
		case "twilio":
			if err := checkProviderURL("MSGAPI_TWILIO_BASE_URL", v.str("MSGAPI_TWILIO_BASE_URL"), v.str("MSGAPI_ENV"), log); err != nil {
				return nil, err
			}
			s, err = sender.NewTwilio(sender.TwilioOptions{
				AccountSID: v.str("MSGAPI_TWILIO_ACCOUNT_SID"), AuthToken: v.str("MSGAPI_TWILIO_AUTH_TOKEN"),
				From: v.str("MSGAPI_TWILIO_FROM"), MessagingServiceSID: v.str("MSGAPI_TWILIO_MESSAGING_SERVICE_SID"),
				BaseURL: v.str("MSGAPI_TWILIO_BASE_URL"), Timeout: c.sendTimeout,
				StatusCallback: statusCallback(v.str("MSGAPI_PUBLIC_URL"), log),
			})
		case "smtp":
			s, err = sender.NewSMTP(sender.SMTPOptions{
				Host: v.str("MSGAPI_SMTP_HOST"), Port: c.smtpPort, Username: v.str("MSGAPI_SMTP_USERNAME"),
				Password: v.str("MSGAPI_SMTP_PASSWORD"), From: v.str("MSGAPI_SMTP_FROM"), TLS: v.str("MSGAPI_SMTP_TLS"), Timeout: c.sendTimeout,
				Unsubscribe: c.unsubscribe,
			})
		}
		if err != nil {
			return nil, fmt.Errorf("%s provider for %s: %w", name, ch, err)
		}
		out[ch] = s
	}
	return out, nil
}

// unsubscribeURL makes the one-click unsubscribe URL of an email on the
// public origin (RFC 8058 asks for HTTPS); without MSGAPI_PUBLIC_URL there
// is nowhere to point, so emails carry no List-Unsubscribe.
func unsubscribeURL(public string, tokens *atomic.Pointer[consent.Tokens], log zerolog.Logger) func(m sender.Message) (string, error) {
	if public == "" {
		log.Warn().Msg("MSGAPI_PUBLIC_URL is not set: emails carry no List-Unsubscribe one-click URL (RFC 8058)")
		return nil
	}
	if !strings.HasPrefix(public, "https://") {
		log.Warn().Msg("MSGAPI_PUBLIC_URL is not https: mail clients ignore a one-click List-Unsubscribe URL that is not HTTPS (RFC 8058)")
	}
	base := strings.TrimRight(public, "/") + api.UnsubscribePath
	return func(m sender.Message) (string, error) {
		t := tokens.Load()
		if t == nil {
			return "", errors.New("the unsubscribe token key is not loaded")
		}
		return base + t.Make(m.WorkspaceID, m.RecipientEmail), nil
	}
}

// consentFact is the workspace event of a suppression-list change.
func consentFact(ch consent.Change) notify.Fact {
	typ, subject := notify.TypeSuppressionCreated, ch.Suppression.ID+":"+strconv.FormatInt(ch.Suppression.Seq, 10)
	if ch.Action == consent.ActionLifted {
		typ, subject = notify.TypeSuppressionDeleted, ch.Suppression.ID+":lifted:"+ch.At.Format(time.RFC3339Nano)
	}
	return notify.Fact{WorkspaceID: ch.Suppression.WorkspaceID, Type: typ, SubjectID: subject, At: ch.At,
		Data: map[string]any{"suppression": ch.Suppression, "action": ch.Action, "source": ch.Source}}
}

// statusCallback is the Twilio delivery-receipt URL on the public origin;
// without MSGAPI_PUBLIC_URL Twilio has nowhere to call, so none is set.
func statusCallback(public string, log zerolog.Logger) string {
	if public == "" {
		log.Warn().Msg("MSGAPI_PUBLIC_URL is not set: Twilio sends carry no StatusCallback, so no delivery receipts arrive")
		return ""
	}
	return strings.TrimRight(public, "/") + receipts.TwilioPath
}

// serve runs the HTTP server until ctx ends, then shuts down gracefully:
// stop accepting, finish in-flight requests within the shutdown timeout,
// stop the reaper, flush logs, stop the store.
func serve(ctx context.Context, v values, stdout io.Writer) error {
	c, err := parseConfig(v)
	if err != nil {
		return err
	}
	// Every line goes to stdout and to the metrics (counted by event name);
	// with MSGAPI_LOKI_URL also to Loki, through a queue that never blocks.
	// The shipper reports its own trouble to stdout only (base).
	out, err := logOutput(stdout, v.str("MSGAPI_LOG_FORMAT"))
	if err != nil {
		return err
	}
	base := newLogger(out, v.str("MSGAPI_LOG_LEVEL")).With().Str("env", v.str("MSGAPI_ENV")).Logger()
	met := metrics.New(metrics.SlowestRequest(c.sendTimeout + c.dedupWait))
	sinks := []io.Writer{out, met.Events()}
	if u := v.str("MSGAPI_LOKI_URL"); u != "" {
		lk, err := loki.New(loki.Options{URL: u, App: "msgapi", Env: v.str("MSGAPI_ENV"), Buffer: c.lokiBuffer, BufferBytes: c.lokiBufferBytes, Log: base})
		if err != nil {
			return fmt.Errorf("MSGAPI_LOKI_URL: %w", err)
		}
		defer func() { // last: the shutdown lines are shipped too
			if err := lk.Close(); err != nil {
				base.Warn().Err(err).Msg("loki: final flush incomplete")
			}
		}()
		met.WatchLoki(lk.Stats)
		sinks = append(sinks, lk)
	}
	// Every sink gets lines capped in length (a field can carry client input).
	log := newLogger(logcap.Writer(zerolog.MultiLevelWriter(sinks...)), v.str("MSGAPI_LOG_LEVEL")).With().Str("env", v.str("MSGAPI_ENV")).Logger()
	if v.str("MSGAPI_LOKI_URL") != "" {
		log.Info().Int("buffer", c.lokiBuffer).Int("bufferBytes", c.lokiBufferBytes).Msg("shipping events to Loki (MSGAPI_LOKI_URL)")
	}

	// Emails carry a one-click unsubscribe URL on the public origin; its
	// token key lives in the store, so the maker is ready once it opens.
	var tokens atomic.Pointer[consent.Tokens]
	c.unsubscribe = unsubscribeURL(v.str("MSGAPI_PUBLIC_URL"), &tokens, log)
	senders, err := buildSenders(c, log)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	defer func() {
		_ = st.Close(context.Background())
		log.Info().Msg("store closed")
	}()
	if e := st.Engine(); e != nil {
		log.Info().Str("socket", e.Socket()).Str("dataDir", e.Dir()).
			Msg("embedded store running (FerretDB, SQLite) on a Unix socket only its user can open; another msgapi process or mongosh of that user attaches through the socket (README: Stores)")
		if e.TCP() != "" {
			log.Warn().Str("tcp", e.TCP()).Msg("embedded store also listens on loopback TCP (MSGAPI_EMBEDDED_ADDR): it has no authentication, so every process on this host can read and change all data")
		}
	} else {
		log.Info().Str("uri", st.URI).Bool("replicaSet", st.ReplicaSet).Msg("connected to MongoDB")
	}
	switch {
	case len(st.Reaped()) > 0 && st.ReapsHere():
		log.Info().Strs("collections", st.Reaped()).Dur("interval", c.reaperInterval).Msg("store has no TTL indexes: the reaper deletes expired documents")
	case len(st.Reaped()) > 0:
		log.Info().Msg("attached to msgapi's embedded store: its host's reaper deletes expired documents for every process, so this one runs none (MSGAPI_REAPER_INTERVAL does not apply)")
	}
	st.RoundTrips.Observe(met.StoreCommand)
	if st.SerialWrites() {
		met.StoreWriter(func() (int64, time.Duration, time.Duration) {
			w := st.WriterStats()
			return w.Commands, w.Wait, w.Busy
		})
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	// life ends when shutdown gives up on in-flight work.
	life, giveUp := context.WithCancel(context.WithoutCancel(ctx))
	defer giveUp()
	go st.RunReaper(bg, c.reaperInterval)

	ms := messages.NewStore(st)
	if c.testUnfenced {
		ms = ms.UnfencedForTests()
		log.Warn().Msg("MSGAPI_TEST_UNFENCED=1: the message-id fence is off; duplicates can be sent twice (tests only)")
	}
	if c.testClockOffset != 0 {
		log.Warn().Dur("offset", c.testClockOffset).Msg("MSGAPI_TEST_CLOCK_OFFSET: the guard's and the Idempotency-Key layer's clock is shifted (tests only)")
	}
	ws := workspace.NewStore(st, c.keyCacheTTL).WithKeyring(c.keyring)
	// Event webhooks: every outcome's event is durable no later than the
	// outcome (ms.OnOutcome), and delivered in the background.
	eo := c.events
	eo.Store, eo.Log, eo.Metrics, eo.Keyring = st, log, met, c.keyring
	outbox := notify.New(eo)
	if err := checkStoredSecrets(ctx, ws, outbox, c.keyring, log); err != nil {
		return err
	}
	outboxDone := make(chan struct{})
	go func() { defer close(outboxDone); outbox.Run(bg) }()
	defer func() { stopBG(); <-outboxDone }()
	// Consent: the suppression list, checked by every send; provider
	// refusals that mean "opted out" (Twilio 21610) feed it.
	cs := consent.New(consent.Options{Store: st, OnChange: func(ctx context.Context, ch consent.Change) error {
		met.ConsentChange(ch.Action, ch.Source)
		_, err := outbox.Record(ctx, consentFact(ch))
		return err
	}})
	tk, err := cs.Tokens(ctx)
	if err != nil {
		return err
	}
	tokens.Store(tk)
	for ch, snd := range senders {
		senders[ch] = cs.ProviderSignals(snd)
	}
	keywords := consent.NewKeywords(consent.KeywordOptions{Store: cs,
		ReplyText: func(ctx context.Context, wsID string) (string, error) {
			w, err := ws.Find(ctx, wsID)
			return w.Settings.OptOutReply, err
		},
		Reply: func(ctx context.Context, in consent.Inbound, text string) (string, string) {
			if in.Channel != "sms" {
				return "skipped", "confirmation replies go out on sms only"
			}
			r := senders["sms"].Send(ctx, sender.Message{ID: "msg_optout_" + in.MessageID, WorkspaceID: in.WorkspaceID,
				Channel: "sms", RecipientPhone: in.Phone, Body: text})
			return string(r.Status), r.Error
		}})
	// Inbound webhooks: MongoDB decides; Redis, when set, only answers
	// redeliveries of completed events sooner.
	hooks := inbound.Options{PublicBaseURL: v.str("MSGAPI_PUBLIC_URL"), TrustedProxies: c.proxies,
		OnReply: func(ctx context.Context, r inbound.Reply) error {
			return keywords.Handle(ctx, consent.Inbound{WorkspaceID: r.WorkspaceID, MessageID: r.MessageID, Channel: r.Channel, Phone: r.Phone, Text: r.Text})
		}}
	limiter := ratelimit.New(ratelimit.Options{}) // per process unless Redis is set
	if u := v.str("MSGAPI_REDIS_URL"); u != "" {
		rc, err := inbound.NewRedis(u)
		if err != nil {
			return fmt.Errorf("MSGAPI_REDIS_URL: %w", err)
		}
		defer rc.Close()
		hooks.Redis = rc
		limiter = ratelimit.New(ratelimit.Options{Redis: rc})
		log.Info().Msg("inbound webhooks: Redis fast path enabled; rate limits shared by every process (MSGAPI_REDIS_URL)")
	}
	if err := checkProviderURL("MSGAPI_HUBSPOT_API_URL", v.str("MSGAPI_HUBSPOT_API_URL"), v.str("MSGAPI_ENV"), log); err != nil {
		return err
	}
	a, err := app.New(app.Options{
		Store: st, Workspaces: ws, Messages: ms, Log: log,
		Senders: senders, DefaultRegion: v.str("MSGAPI_DEFAULT_REGION"), AdminToken: c.adminToken, Lifetime: life,
		Guard: guard.Options{Window: c.dedupWindow, Wait: c.dedupWait, Lease: c.dedupLease,
			RefuseOnStoreError: v.str("MSGAPI_DEDUP_ON_STORE_ERROR") == "refuse", Now: c.testClock()},
		Idempotency: idempotency.Options{TTL: c.idemTTL, Lease: c.idemLease, Now: c.testClock()},
		Outbox:      outbox, Consent: cs, Unsubscribe: tk,
		Inbound: hooks,
		Receipts: receipts.Options{TwilioAuthToken: v["MSGAPI_TWILIO_AUTH_TOKEN"], RelaySecret: v["MSGAPI_WEBHOOK_SECRET"],
			PublicBaseURL: v.str("MSGAPI_PUBLIC_URL"), TrustedProxies: c.proxies},
		OutcomeAfter: c.sendTimeout + c.outcomeMargin,
		Metrics:      met,
		Limiter:      limiter, RateLimit: c.rateLimit,
		SendTimeout: c.sendTimeout,
		TestSender:  sender.NewLog(log.With().Bool("testKey", true).Logger(), 0),
		PublicURL:   v.str("MSGAPI_PUBLIC_URL"),
		HubSpot:     hubspot.Options{APIBase: strings.TrimRight(v.str("MSGAPI_HUBSPOT_API_URL"), "/"), Client: &http.Client{}, Log: log},
	})
	if err != nil {
		return err
	}
	// Lost outcomes become unknown: at start-up, then every interval.
	go a.Sweeper.Run(bg, c.sweepInterval)
	// Scheduled messages go out at their time.
	go a.Scheduler.Run(bg)
	// BLOCKed HubSpot executions are completed once their outcome is known.
	go a.HubSpot.Run(bg)

	defer ws.Wait() // the last lastUsedAt writes, before the store closes
	if c.adminToken == "" {
		log.Info().Msg("admin API disabled (set MSGAPI_ADMIN_TOKEN to enable /admin/*)")
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.addr, err)
	}
	hs := &http.Server{
		Handler:           a.Server.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      c.sendTimeout + c.dedupWait + 30*time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Msg("msgapi listening")

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	// Graceful drain: stop accepting, let every request — its provider
	// call and its outcome write included — finish, then stop background
	// work and close the store (deferred). What is still running when the
	// timeout passes is abandoned by message id to the outcome sweeper.
	log.Info().Dur("timeout", c.shutdownTimeout).Msg("shutting down: no new connections, finishing in-flight requests and provider calls")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		giveUp()
		log.Error().Err(err).Strs("abandoned", a.Send.InFlight()).
			Msg("shutdown timeout passed with requests in flight; their messages are left for the outcome sweeper")
	}
	stopBG()
	log.Info().Msg("http server stopped")
	return nil
}
