package test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/secrets"
	"github.com/msgapi/msgapi/vendorsig"
)

func randomKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func keyID(t *testing.T, key string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	return secrets.KeyID(raw)
}

// twilioWebhook posts an inbound SMS signed with token, as Twilio would.
func (p *proc) twilioWebhook(wsID, token, sid string) reply {
	p.t.Helper()
	path := "/api/webhooks/" + wsID + "/twilio"
	params := url.Values{"MessageSid": {sid}, "From": {"+14155550100"}, "To": {"+15005550006"}, "Body": {"hello " + sid},
		"AccountSid": {"AC0123456789abcdef0123456789abcdef"}, "NumMedia": {"0"}}
	req, _ := http.NewRequest(http.MethodPost, p.url+path, strings.NewReader(params.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(vendorsig.TwilioSignature(token, p.url+path, params)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return reply{res.StatusCode, res.Header, b.Bytes()}
}

// filesContaining lists the files under dir whose raw bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// runCLI runs the binary to completion and returns its output and error.
func runCLI(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "MSGAPI_ADDR=" + freeAddr(t)}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// With MSGAPI_SECRET_KEY a copy of the data folder holds no Twilio token:
// after a write and a restart no file's bytes contain it, while the
// webhook signature check, which needs the token, still passes. Without the
// key the same bytes do contain it (so the search can find it), start-up
// says so, and an encrypted folder refuses to start without its key.
// Rotation re-encrypts under a new key.
func TestSecretsEncryptedAtRest(t *testing.T) {
	tb := make([]byte, 16)
	_, _ = rand.Read(tb)
	token := hex.EncodeToString(tb) // 32 hex digits, like a Twilio auth token
	keyA, keyB := randomKey(t), randomKey(t)
	dir := t.TempDir()
	env := embeddedEnv(t, dir)
	env["MSGAPI_SECRET_KEY"] = keyA

	p := start(t, env)
	wsID, _ := p.createWorkspace(admin)
	if r := p.do(http.MethodPut, "/admin/workspaces/"+wsID+"/secrets/twilio", admin, `{"secret":"`+token+`"}`); r.status != http.StatusNoContent {
		t.Fatalf("set the Twilio secret: %d %s", r.status, r.body)
	}
	if r := p.twilioWebhook(wsID, token, "SM1"); r.status != http.StatusOK {
		t.Fatalf("signed webhook: %d %s", r.status, r.body)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}

	p2 := start(t, env)
	if r := p2.twilioWebhook(wsID, token, "SM2"); r.status != http.StatusOK {
		t.Errorf("signed webhook after a restart: %d %s", r.status, r.body)
	}
	if r := p2.twilioWebhook(wsID, "not-the-token", "SM3"); r.status != http.StatusUnauthorized {
		t.Errorf("webhook signed with another token: %d, want 401", r.status)
	}
	if err := p2.stop(); err != nil {
		t.Fatal(err)
	}
	if hits := filesContaining(t, dir, token); len(hits) > 0 {
		t.Errorf("the Twilio token is readable in %v of the data folder", hits)
	}
	for i, logs := range []string{p.Logs(), p2.Logs()} {
		if strings.Contains(logs, token) || strings.Contains(logs, keyA) {
			t.Errorf("process %d logged the token or the key", i+1)
		}
		if strings.Contains(logs, "IN CLEAR") || !strings.Contains(logs, "encrypted at rest") {
			t.Errorf("process %d does not say secrets are encrypted:\n%s", i+1, logs)
		}
	}

	// Without its key an encrypted folder does not start.
	noKey := embeddedEnv(t, dir)
	out, err := runCLI(t, noKey, "serve")
	if err == nil || !strings.Contains(out, "MSGAPI_SECRET_KEY") || !strings.Contains(out, keyID(t, keyA)) {
		t.Errorf("start without the key: %v\n%s\nwant a refusal naming MSGAPI_SECRET_KEY and key id %s", err, out, keyID(t, keyA))
	}

	// Rotation to key B: the old key is previous, the command re-encrypts.
	rot := embeddedEnv(t, dir)
	rot["MSGAPI_SECRET_KEY"], rot["MSGAPI_SECRET_KEY_PREVIOUS"] = keyB, keyA
	if out, err := runCLI(t, rot, "secrets", "rotate"); err != nil || !strings.Contains(out, "1 secrets re-encrypted") {
		t.Fatalf("secrets rotate: %v\n%s", err, out)
	}
	if out, err := runCLI(t, rot, "secrets", "rotate"); err != nil || !strings.Contains(out, "MSGAPI_SECRET_KEY_PREVIOUS can be removed") {
		t.Errorf("second rotate: %v\n%s", err, out)
	}
	onlyB := embeddedEnv(t, dir)
	onlyB["MSGAPI_SECRET_KEY"] = keyB
	p3 := start(t, onlyB)
	if r := p3.twilioWebhook(wsID, token, "SM4"); r.status != http.StatusOK {
		t.Errorf("signed webhook under the rotated key: %d %s", r.status, r.body)
	}
	if err := p3.stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, env, "serve"); err == nil || !strings.Contains(out, keyID(t, keyB)) {
		t.Errorf("start with the old key alone after rotation: %v\n%s\nwant a refusal naming key id %s", err, out, keyID(t, keyB))
	}

	// The control: without a key the token is in the files, and start-up says so.
	clearDir := t.TempDir()
	c := start(t, embeddedEnv(t, clearDir))
	cws, _ := c.createWorkspace(admin)
	if r := c.do(http.MethodPut, "/admin/workspaces/"+cws+"/secrets/twilio", admin, `{"secret":"`+token+`"}`); r.status != http.StatusNoContent {
		t.Fatalf("set the Twilio secret: %d %s", r.status, r.body)
	}
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	if hits := filesContaining(t, clearDir, token); len(hits) == 0 {
		t.Error("without a key the token is not found in the data folder either: the search proves nothing")
	}
	if !strings.Contains(c.Logs(), "stored IN CLEAR") {
		t.Errorf("start-up without MSGAPI_SECRET_KEY does not warn that secrets are in clear:\n%s", c.Logs())
	}
}

// Event endpoint secrets (whsec_…) are sealed under MSGAPI_SECRET_KEY like
// every other secret: the raw store holds no whsec_, `msgapi secrets rotate`
// re-seals them under the new key, and deliveries are still signed with the
// secret the workspace was shown.
func TestEndpointSecretsSealedAndRotated(t *testing.T) {
	hooks := newHookReceiver(t)
	keyA, keyB := randomKey(t), randomKey(t)
	dir := t.TempDir()
	withKey := func(current, previous string) map[string]string {
		env := embeddedEnv(t, dir)
		env["MSGAPI_SECRET_KEY"], env["MSGAPI_SECRET_KEY_PREVIOUS"] = current, previous
		env["MSGAPI_ENV"], env["MSGAPI_EGRESS_ALLOW_LOOPBACK"] = "development", "true" // the receiver is a loopback server
		env["MSGAPI_EVENTS_RETRY_SCHEDULE"], env["MSGAPI_EVENTS_POLL_INTERVAL"] = "0s,200ms,200ms", "100ms"
		return env
	}
	rawSecret := func(env map[string]string, id string) string {
		var doc struct{ Secret string }
		if err := connectStore(t, engineURI(env)).Collection("webhook_endpoints").FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return doc.Secret
	}
	envA := withKey(keyA, "")
	p := start(t, envA)
	_, key := p.createWorkspace(admin)
	r := p.do(http.MethodPost, "/api/webhook-endpoints", key, `{"url":"`+hooks.srv.URL+`/hooks","eventTypes":["message.sent"]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("register endpoint: %d %s", r.status, r.body)
	}
	ep := r.json(t)["endpoint"].(map[string]any)
	id, secret := ep["id"].(string), ep["secret"].(string)
	hooks.setSecret(t, secret)
	if raw := rawSecret(envA, id); strings.Contains(raw, "whsec_") || !strings.HasPrefix(raw, secrets.Prefix+keyID(t, keyA)+":") {
		t.Errorf("stored endpoint secret %.8q…, want sealed under key %s", raw, keyID(t, keyA))
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}

	if out, err := runCLI(t, withKey(keyB, keyA), "secrets", "rotate"); err != nil || !strings.Contains(out, "1 secrets re-encrypted") {
		t.Fatalf("secrets rotate: %v\n%s", err, out)
	}
	envB := withKey(keyB, "")
	p2 := start(t, envB)
	if raw := rawSecret(envB, id); !strings.HasPrefix(raw, secrets.Prefix+keyID(t, keyB)+":") {
		t.Errorf("after rotation the endpoint secret is %.8q…, want sealed under key %s", raw, keyID(t, keyB))
	}
	if r := p2.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100001","body":"Hello"}`); r.status != http.StatusCreated {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		hits := hooks.of("message.sent")
		if len(hits) > 0 && hits[len(hits)-1].valid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no validly signed message.sent under the rotated key: %+v", hits)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p2.stop(); err != nil {
		t.Fatal(err)
	}
	// The old key alone cannot open what is now sealed under the new one.
	if out, err := runCLI(t, withKey(keyA, ""), "serve"); err == nil || !strings.Contains(out, keyID(t, keyB)) {
		t.Errorf("start with the old key alone: %v\n%s\nwant a refusal naming key id %s", err, out, keyID(t, keyB))
	}
}
