package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Provider modes the nemesis switches the receiver into.
const (
	modeOK   = "ok"
	modeSlow = "slow" // answers 2xx after most of the send timeout
	mode4xx  = "4xx"  // refuses: the message reached no one
	mode5xx  = "5xx"  // fails ambiguously
	modeHang = "hang" // answers only after the send timeout has passed
)

// receiver is the relay behind msgapi's webhook provider, as in
// test/load: what it records is what reached the person. It records every
// call, whatever it answers, and checks the signature with its own code in
// either scheme msgapi may use: X-Msgapi-Signature (sha256=<hex HMAC of the
// body>) or Standard Webhooks v1 (webhook-id, webhook-timestamp,
// webhook-signature: v1,<base64 HMAC of "id.timestamp.body">).
type receiver struct {
	ln          net.Listener
	srv         *http.Server
	secret      []byte // the key: the secret's bytes, or whsec_'s decoded base64
	sendTimeout time.Duration

	mu     sync.Mutex
	mode   string
	got    []Delivery
	badSig int
}

func startReceiver(secret string, sendTimeout time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	key := []byte(secret)
	if b, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if key, err = base64.StdEncoding.DecodeString(b); err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
	}
	r := &receiver{ln: ln, secret: key, sendTimeout: sendTimeout, mode: modeOK}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) url() string { return "http://" + r.ln.Addr().String() + "/" }

func (r *receiver) setMode(m string) {
	r.mu.Lock()
	r.mode = m
	r.mu.Unlock()
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// verified reports whether the call carries a valid signature in either
// scheme.
func (r *receiver) verified(h http.Header, body []byte) bool {
	if sig := h.Get("X-Msgapi-Signature"); sig != "" {
		mac := hmac.New(sha256.New, r.secret)
		mac.Write(body)
		if hmac.Equal([]byte(sig), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {
			return true
		}
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, r.secret)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil || req.Method != http.MethodPost || !r.verified(req.Header, body) {
		r.mu.Lock()
		r.badSig++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p struct {
		MessageID      string `json:"messageId"`
		WorkspaceID    string `json:"workspaceId"`
		RecipientPhone string `json:"recipientPhone"`
		Body           string `json:"body"`
	}
	if json.Unmarshal(body, &p) != nil || p.MessageID == "" || p.MessageID != req.Header.Get("Idempotency-Key") {
		r.mu.Lock()
		r.badSig++ // signed, but not the relay contract
		r.mu.Unlock()
		http.Error(w, "messageId missing or not the Idempotency-Key", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	mode := r.mode
	r.got = append(r.got, Delivery{MessageID: p.MessageID, Workspace: p.WorkspaceID, Recipient: p.RecipientPhone, Body: p.Body, Outcome: mode, At: time.Now()})
	n := len(r.got)
	r.mu.Unlock()

	switch mode {
	case mode4xx:
		http.Error(w, `{"error":"recipient refused"}`, http.StatusUnprocessableEntity)
		return
	case mode5xx:
		http.Error(w, `{"error":"relay unavailable"}`, http.StatusServiceUnavailable)
		return
	case modeSlow:
		time.Sleep(r.sendTimeout * 6 / 10)
	case modeHang:
		time.Sleep(r.sendTimeout + 500*time.Millisecond)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"relay-%d"}`, n)
}

// deliveries is everything recorded so far.
func (r *receiver) deliveries() ([]Delivery, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...), r.badSig
}
