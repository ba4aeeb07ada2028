package test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/msgapi/msgapi/store"
)

const admin = "system-test-admin"

func embeddedEnv(t *testing.T, dir string) map[string]string {
	return map[string]string{
		"MSGAPI_DATA_DIR":    dir,
		"MSGAPI_ADMIN_TOKEN": admin,
	}
}

// engineURI is how a second process attaches to the embedded engine of the
// process whose env is given: the Unix socket in its data folder.
func engineURI(env map[string]string) string {
	return store.SocketURI(filepath.Join(env["MSGAPI_DATA_DIR"], store.SocketName))
}

// The README's promise: one command starts a working server on an empty
// data folder; workspaces and keys survive a restart; shutdown is clean.
func TestServeRestartKeepsWorkspaces(t *testing.T) {
	dir := t.TempDir()
	env := embeddedEnv(t, dir)
	p := start(t, env)
	// The engine serves only a socket only its user can open, and the log
	// names the socket, never a connection string.
	sock := filepath.Join(dir, store.SocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("engine socket %s: %v %v, want mode 0600", sock, fi, err)
	}
	if !strings.Contains(p.Logs(), `"socket":"`+sock+`"`) || strings.Contains(p.Logs(), "mongodb://") {
		t.Errorf("start-up log does not name the socket, or shows a connection string:\n%s", p.Logs())
	}
	_, key := p.createWorkspace(admin)
	r := p.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+1 (555) 010-0000","body":"Hello"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	id := r.json(t)["message"].(map[string]any)["id"].(string)
	if err := p.stop(); err != nil {
		t.Fatalf("SIGTERM: exit %v\n%s", err, p.Logs())
	}
	for _, want := range []string{"NO real message leaves", "embedded store running", "shutting down", "store closed"} {
		if !strings.Contains(p.Logs(), want) {
			t.Errorf("logs lack %q", want)
		}
	}
	if strings.Contains(p.Logs(), key) {
		t.Error("the API key was logged")
	}

	p2 := start(t, env)
	g := p2.do(http.MethodGet, "/api/messages/"+id, key, "")
	if g.status != http.StatusOK {
		t.Fatalf("after restart, GET with the old key: %d %s", g.status, g.body)
	}
	if w := p2.do(http.MethodGet, "/api/messages/"+id, "mk_wrong", ""); w.status != http.StatusUnauthorized || w.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("wrong key: %d %s", w.status, w.header.Get("Content-Type"))
	}
}

func TestWorkspaceCLI(t *testing.T) {
	dir := t.TempDir()
	env := embeddedEnv(t, dir)
	cmd := exec.Command(binary(t), "workspace", "create", "Acme", "CLI")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("workspace create: %v\n%s", err, out)
	}
	key := regexp.MustCompile(`mk_[A-Za-z0-9_-]{43}`).FindString(string(out))
	if key == "" {
		t.Fatalf("no key in the output:\n%s", out)
	}
	p := start(t, env)
	r := p.do(http.MethodPost, "/api/messages", key, `{"channel":"email","recipientEmail":"a@example.com","body":"hi"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("send with the CLI's key: %d %s", r.status, r.body)
	}
}

// receiver is the far side of the webhook sender: it verifies each
// delivery's signature and counts deliveries per message id.
type receiver struct {
	srv    *httptest.Server
	secret string
	mu     sync.Mutex
	byID   map[string]int
	bad    atomic.Int64
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{secret: secret, byID: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mac := hmac.New(sha256.New, []byte(r.secret))
		mac.Write(body)
		if req.Header.Get("X-Msgapi-Signature") != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
			r.bad.Add(1)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		r.byID[req.Header.Get("Idempotency-Key")]++
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"relay-1"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() (total int, ids int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.byID {
		total += n
	}
	return total, len(r.byID)
}

// Two msgapi processes share one store (the second connects to the first's
// embedded engine); a duplicate storm split across them delivers once.
func TestTwoProcessesDuplicateStorm(t *testing.T) {
	rcv := newReceiver(t, "relay-secret")
	env := embeddedEnv(t, t.TempDir())
	for k, v := range map[string]string{"MSGAPI_SENDER_SMS": "webhook", "MSGAPI_WEBHOOK_URL": rcv.srv.URL, "MSGAPI_WEBHOOK_SECRET": "relay-secret", "MSGAPI_LOG_LEVEL": "warn"} {
		env[k] = v
	}
	a := start(t, env)
	envB := map[string]string{"MONGODB_URI": engineURI(env)}
	for k, v := range env {
		if k != "MSGAPI_DATA_DIR" {
			envB[k] = v
		}
	}
	b := start(t, envB)
	_, key := a.createWorkspace(admin)

	const n = 40
	var wg sync.WaitGroup
	gate := make(chan struct{})
	ids := make([]string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-gate
			p := a
			if i%2 == 1 {
				p = b
			}
			r := p.do(http.MethodPost, "/api/messages", key, `{"channel":"sms","recipientPhone":"+15550100000","body":"Two processes, one send"}`)
			if r.status != 200 && r.status != 201 {
				t.Errorf("request %d: %d %s", i, r.status, r.body)
				return
			}
			if m, ok := r.json(t)["message"].(map[string]any); ok {
				ids[i], _ = m["id"].(string)
			}
		}(i)
	}
	close(gate)
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	total, distinct := rcv.deliveries()
	if total != 1 || distinct != 1 || rcv.bad.Load() != 0 {
		t.Errorf("receiver got %d deliveries of %d messages (%d badly signed), want exactly 1", total, distinct, rcv.bad.Load())
	}
	for i, id := range ids {
		if id != "" && id != ids[0] {
			t.Errorf("answer %d names %s, answer 0 names %s", i, id, ids[0])
		}
	}
}
