package inbound_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/api"
	"github.com/msgapi/msgapi/inbound"
	"github.com/msgapi/msgapi/messages"
	keyring "github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
	"github.com/msgapi/msgapi/vendorsig"
	"github.com/msgapi/msgapi/workspace"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// The channel secrets every test workspace gets.
var secrets = map[string]string{
	inbound.ChannelSlack:    "slack-signing-secret",
	inbound.ChannelTwilio:   "twilio-auth-token",
	inbound.ChannelTelegram: "telegram-secret-token",
	inbound.ChannelEmail:    "email-relay-secret",
}

// sealingKey encrypts the channel secrets of every test workspace.
var sealingKey = func() *keyring.Keyring {
	k, err := keyring.NewKeyring(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)), nil)
	if err != nil {
		panic(err)
	}
	return k
}()

var allCollections = func() []store.Collection {
	var c []store.Collection
	for _, cs := range [][]store.Collection{workspace.Collections, messages.Collections, inbound.Collections} {
		c = append(c, cs...)
	}
	return c
}()

// env is one msgapi HTTP server (api.New with the webhook routes mounted)
// over a store.
type env struct {
	t    testing.TB
	st   *store.Store
	h    *inbound.Handler
	wsID string
	url  string
	logs *syncBuffer
	// handler is the server's handler, for a request served in-process
	// (to see how much of its body was read).
	handler http.Handler
}

type envOpts struct {
	st    *store.Store // share this store's database (a second process)
	wsID  string       // with st: the workspace already created
	redis *redis.Client
	now   func() time.Time
	// proxies whose X-Forwarded-* headers are believed (the test client is
	// on loopback).
	proxies []netip.Prefix
	// noKey runs the server without the key the secrets were sealed with.
	noKey bool
	// crash, when set, runs after the message is written and before
	// completion is recorded.
	crash func() error
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	st := o.st
	if st == nil {
		st = storetest.New(t, allCollections...)
	}
	// Every test server seals its secrets, as a production one with
	// MSGAPI_SECRET_KEY does: the signature checks read them decrypted.
	wss := workspace.NewStore(st, 0).WithKeyring(sealingKey)
	if o.noKey {
		wss = workspace.NewStore(st, 0)
	}
	logs := &syncBuffer{}
	h := inbound.New(inbound.Options{Store: st, Workspaces: wss, Messages: messages.NewStore(st), Redis: o.redis, Now: o.now, TrustedProxies: o.proxies})
	if o.crash != nil {
		inbound.SetAfterMessage(h, o.crash)
	}
	srv := api.New(api.Options{Log: zerolog.New(logs), Store: st, Workspaces: wss, Inbound: h.Receive})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	e := &env{t: t, st: st, h: h, wsID: o.wsID, url: hs.URL, logs: logs, handler: srv.Handler()}
	if o.st == nil {
		ctx := context.Background()
		ws, _, err := wss.Create(ctx, "Acme")
		if err != nil {
			t.Fatalf("create workspace: %v", err)
		}
		for ch, s := range secrets {
			if err := wss.SetSecret(ctx, ws.ID, ch, s); err != nil {
				t.Fatalf("set %s secret: %v", ch, err)
			}
		}
		e.wsID = ws.ID
	}
	return e
}

// twin is a second server on the same database through its own store
// client, as a second msgapi process would be.
func (e *env) twin(redisClient *redis.Client) *env {
	e.t.Helper()
	uri, dir := storetest.URI(e.t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Options{URI: uri, SQLiteDir: dir, Database: e.st.DB.Name(), Log: zerolog.Nop()})
	if err != nil {
		e.t.Fatalf("open second store: %v", err)
	}
	e.t.Cleanup(func() { _ = st.Close(context.Background()) })
	return newEnv(e.t, envOpts{st: st, wsID: e.wsID, redis: redisClient})
}

// listed is the workspace's message listing (GET /api/messages), ids
// newest first.
func (e *env) listed() []string {
	e.t.Helper()
	q, err := messages.ParseListQuery(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := messages.NewStore(e.st).List(context.Background(), e.wsID, q)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, m := range p.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// ack decodes a JSON acknowledgement.
func (r response) ack(t testing.TB) (duplicate bool, messageID string) {
	t.Helper()
	var a struct {
		Success   bool   `json:"success"`
		Duplicate bool   `json:"duplicate"`
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil || !a.Success {
		t.Fatalf("not an acknowledgement: %s (%v)", r, err)
	}
	return a.Duplicate, a.MessageID
}

// assertProblem checks a problem+json answer with the given status and code.
func assertProblem(t testing.TB, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %s, want %d", r, status)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p struct {
		Code    string `json:"code"`
		Success *bool  `json:"success"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil || p.Code != code || p.Success == nil || *p.Success {
		t.Errorf("problem = %s, want code %q and success false", r.body, code)
	}
}

// delivery is one vendor request.
type delivery struct {
	ch          string
	body        []byte
	contentType string
	header      http.Header // extra headers, set after signing
	secret      string      // signs with this instead of the workspace's
	path        string      // instead of /api/webhooks/{ws}/{ch}
	slackTime   time.Time   // Slack timestamp; zero: now
	relayTime   time.Time   // email relay: webhook-timestamp; zero: now
	legacyRelay bool        // email relay: the deprecated X-Msgapi-Signature instead
	signedURL   string      // Twilio: the URL to sign; "": the URL called
	unsigned    bool
}

func (e *env) path(ch string) string { return "/api/webhooks/" + e.wsID + "/" + ch }

// deliver signs d as its vendor would and posts it.
func (e *env) deliver(d delivery) response {
	e.t.Helper()
	path := d.path
	if path == "" {
		path = e.path(d.ch)
	}
	req, err := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(d.body))
	if err != nil {
		e.t.Fatal(err)
	}
	ct := d.contentType
	if ct == "" {
		ct = "application/json"
		if d.ch == inbound.ChannelTwilio {
			ct = "application/x-www-form-urlencoded"
		}
	}
	req.Header.Set("Content-Type", ct)
	secret := secrets[d.ch]
	if d.secret != "" {
		secret = d.secret
	}
	if !d.unsigned {
		sign(req, d, secret, e.url+path)
	}
	for k, v := range d.header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// sign adds the vendor's signature headers, computed independently of the
// package's own helpers where that is short (it is, except Twilio's).
func sign(req *http.Request, d delivery, secret, calledURL string) {
	switch d.ch {
	case inbound.ChannelSlack:
		ts := d.slackTime
		if ts.IsZero() {
			ts = time.Now()
		}
		s := strconv.FormatInt(ts.Unix(), 10)
		req.Header.Set("X-Slack-Request-Timestamp", s)
		req.Header.Set("X-Slack-Signature", "v0="+hexHMAC(secret, "v0:"+s+":"+string(d.body)))
	case inbound.ChannelTwilio:
		u := calledURL
		if d.signedURL != "" {
			u = d.signedURL
		}
		params, _ := url.ParseQuery(string(d.body))
		req.Header.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(vendorsig.TwilioSignature(secret, u, params)))
	case inbound.ChannelTelegram:
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	case inbound.ChannelEmail:
		if d.legacyRelay {
			req.Header.Set("X-Msgapi-Signature", "sha256="+hexHMAC(secret, string(d.body)))
			return
		}
		// Standard Webhooks: a whsec_ secret's key is its decoded bytes, a
		// legacy secret's its UTF-8 bytes ("raw:" forces the latter).
		key := []byte(secret)
		if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
			key, _ = base64.StdEncoding.DecodeString(b64)
		} else if raw, ok := strings.CutPrefix(secret, "raw:"); ok {
			key = []byte(raw)
		}
		ts := d.relayTime
		if ts.IsZero() {
			ts = time.Now()
		}
		id, s := "relay-"+strconv.Itoa(rand.Int()), strconv.FormatInt(ts.Unix(), 10)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + s + "." + string(d.body)))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", s)
		req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
}

func hexHMAC(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// Real-shaped payloads.

func slackMessage(eventID, eventTS, text string) []byte {
	ev := map[string]any{
		"type": "message", "channel": "C2147483705", "user": "U2147483697", "text": text,
		"ts": eventTS, "event_ts": eventTS, "channel_type": "channel", "team": "T0001",
	}
	env := map[string]any{
		"token": "XXYYZZ", "team_id": "T0001", "api_app_id": "A0001", "event": ev,
		"type": "event_callback", "event_time": 1355517523,
		"authorizations": []any{map[string]any{"team_id": "T0001", "user_id": "U0BOT", "is_bot": true}},
	}
	if eventID != "" {
		env["event_id"] = eventID
	}
	return mustJSON(env)
}

func twilioSMS(sid, from, body string) []byte {
	v := url.Values{
		"ToCountry": {"US"}, "SmsMessageSid": {sid}, "NumMedia": {"0"}, "SmsSid": {sid}, "SmsStatus": {"received"},
		"Body": {body}, "To": {"+15005550006"}, "NumSegments": {"1"}, "MessageSid": {sid},
		"AccountSid": {"AC0123456789abcdef0123456789abcdef"}, "From": {from}, "ApiVersion": {"2010-04-01"},
	}
	return []byte(v.Encode())
}

func telegramUpdate(updateID int64, fromID int64, text string) []byte {
	return mustJSON(map[string]any{
		"update_id": updateID,
		"message": map[string]any{
			"message_id": 1365, "date": 1441645532, "text": text,
			"from": map[string]any{"id": fromID, "is_bot": false, "first_name": "Ada", "language_code": "en"},
			"chat": map[string]any{"id": fromID, "type": "private", "first_name": "Ada"},
		},
	})
}

func relayEmail(messageID, from string, atts ...inbound.RelayAttachment) []byte {
	return mustJSON(inbound.Relay{
		Headers: map[string]string{"Message-ID": messageID, "Date": "Mon, 2 Jun 2025 10:00:00 +0000"},
		From:    from, To: []string{"support@acme.example"}, Subject: "Invoice", Text: "Please find it attached.",
		Attachments: atts,
	})
}

func attachment(name, contentType string, data []byte) inbound.RelayAttachment {
	return inbound.RelayAttachment{Filename: name, ContentType: contentType, Content: base64.StdEncoding.EncodeToString(data)}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Store probes.

// writes is the number of write commands the store has received.
func (e *env) writes() int64 {
	m := e.st.RoundTrips.ByName()
	return m["insert"] + m["update"] + m["delete"] + m["findAndModify"]
}

func (e *env) count(coll string) int64 {
	e.t.Helper()
	n, err := e.st.Collection(coll).CountDocuments(context.Background(), bson.D{})
	if err != nil {
		e.t.Fatalf("count %s: %v", coll, err)
	}
	return n
}

func (e *env) message(id string) messages.Message {
	e.t.Helper()
	m, found, err := messages.NewStore(e.st).Get(context.Background(), id)
	if err != nil || !found {
		e.t.Fatalf("message %s: found %v, err %v", id, found, err)
	}
	return m
}

// events returns the logged lines with event=name.
func (e *env) events(name string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == name {
			out = append(out, m)
		}
	}
	return out
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Redis.

// redisServer is a real redis-server on a free loopback port, without
// persistence, stopped when the test ends.
type redisServer struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// startRedis starts redis-server, or skips the test (with the reason) when
// the binary is not installed; CI installs it.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server); the MongoDB-only variant of this test still runs")
	}
	r := &redisServer{t: t, port: freePort(t)}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.t.TempDir())
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not answer within 10s", r.addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *redisServer) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// restart loses every key: the server keeps nothing on disk.
func (r *redisServer) restart() {
	r.stop()
	r.start()
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// client is the fast-path client msgapi itself would use.
func (r *redisServer) client() *redis.Client { return redisClient(r.t, "redis://"+r.addr()+"/0") }

func redisClient(t testing.TB, u string) *redis.Client {
	t.Helper()
	c, err := inbound.NewRedis(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// backend is "MongoDB alone" or "Redis in front of MongoDB".
type backend struct {
	name  string
	redis func(t testing.TB) *redis.Client
}

var backends = []backend{
	{"mongo", func(testing.TB) *redis.Client { return nil }},
	{"redis", func(t testing.TB) *redis.Client { return startRedis(t).client() }},
}
