package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// receiver is the far side of msgapi's webhook provider: what it counts is
// what reached the person. It checks the signature from the relay contract
// (X-Msgapi-Signature: sha256=<hex HMAC-SHA256 of the body>) with its own
// code rather than msgapi's, so the two cannot agree on a mistake.
type receiver struct {
	ln     net.Listener
	srv    *http.Server
	secret []byte
	prefix string // bodies of this run start with it

	mu sync.Mutex
	d  deliveries
}

// deliveries is what the receiver saw.
type deliveries struct {
	total      int
	byMessage  map[string]int      // message id (Idempotency-Key) → deliveries
	byLogical  map[string][]string // logical message → the message ids delivered for it
	badSig     int                 // refused: wrong or missing signature
	badPayload int                 // refused: not the relay contract
	foreign    int                 // well signed, but not a text of this run
}

// bodyPrefix starts every text of one run; the receiver reads the logical
// message from what follows, up to the colon.
func bodyPrefix(runID string) string { return "msgapi-load " + runID + " " }

func startReceiver(addr, secret, prefix string) (*receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	r := &receiver{
		ln: ln, secret: []byte(secret), prefix: prefix,
		d: deliveries{byMessage: map[string]int{}, byLogical: map[string][]string{}},
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) url() string { return "http://" + r.ln.Addr().String() + "/" }

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	mac := hmac.New(sha256.New, r.secret)
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if req.Method != http.MethodPost || !hmac.Equal([]byte(req.Header.Get("X-Msgapi-Signature")), []byte(want)) {
		r.mu.Lock()
		r.d.badSig++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p struct {
		MessageID string `json:"messageId"`
		Body      string `json:"body"`
	}
	id := req.Header.Get("Idempotency-Key")
	if json.Unmarshal(body, &p) != nil || p.MessageID == "" || p.MessageID != id {
		r.mu.Lock()
		r.d.badPayload++
		r.mu.Unlock()
		http.Error(w, "messageId missing or not the Idempotency-Key", http.StatusBadRequest)
		return
	}
	rest, ours := strings.CutPrefix(p.Body, r.prefix)
	logical, _, _ := strings.Cut(rest, ":")

	r.mu.Lock()
	r.d.total++
	n := r.d.total
	r.d.byMessage[id]++
	if ours {
		r.d.byLogical[logical] = append(r.d.byLogical[logical], id)
	} else {
		r.d.foreign++
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"relay-%d"}`, n)
}

// settle waits until no delivery has arrived for a quarter second (at most
// five seconds) and returns what was delivered. Every send finishes before
// its answer, so this only guards against a provider call that outlived its
// request.
func (r *receiver) settle() deliveries {
	last, quiet := -1, time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		r.mu.Lock()
		n := r.d.total
		r.mu.Unlock()
		if n != last {
			last, quiet = n, time.Now()
		} else if time.Since(quiet) >= 250*time.Millisecond {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.d
	d.byMessage = maps.Clone(r.d.byMessage)
	d.byLogical = make(map[string][]string, len(r.d.byLogical))
	for k, v := range r.d.byLogical {
		d.byLogical[k] = append([]string(nil), v...)
	}
	return d
}
