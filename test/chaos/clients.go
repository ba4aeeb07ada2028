package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/msgapi/msgapi/messages"
)

// Client behaviour, compressed to the short windows of the run.
const (
	requestTimeout = 3 * time.Second // a CRM workflow's HTTP step timeout
	// retrySpan bounds when a logical message without a key is retried:
	// every one of its requests starts within it of the first. With the
	// request timeout, the longest stall and the largest clock offset it
	// stays well inside the dedup window (see the package comment).
	retrySpan = 8 * time.Second
	// lateRetry is when a keyed message is retried once more: after its
	// dedup window, when only the key can still stop a second send.
	lateRetry  = dedupWindow + 2*time.Second
	keyedShare = 0.4
)

// recorder collects the history of the run.
type recorder struct {
	mu       sync.Mutex
	logical  []Logical
	requests []Request
}

func (r *recorder) addLogical(l Logical) {
	r.mu.Lock()
	r.logical = append(r.logical, l)
	r.mu.Unlock()
}

func (r *recorder) addRequest(q Request) {
	r.mu.Lock()
	r.requests = append(r.requests, q)
	r.mu.Unlock()
}

// workload drives the clients.
type workload struct {
	c       *cluster
	http    *http.Client
	rec     *recorder
	runID   string
	late    sync.WaitGroup // late retries still to come
	loadEnd time.Time      // no new logical message after this
}

// client sends one logical message after another until the load ends:
// each by 1–3 concurrent callers (some released together, an immediate
// duplicate), each retrying after a timeout, a 5xx, a 409 or a pending
// answer (after Retry-After), sometimes through another process; with a
// key, one more retry after the dedup window.
func (w *workload) client(ctx context.Context, n int, rng *rand.Rand) {
	for seq := 0; ctx.Err() == nil && time.Now().Before(w.loadEnd); seq++ {
		id := fmt.Sprintf("c%02d-%04d", n, seq)
		l := Logical{
			ID:        id,
			Recipient: fmt.Sprintf("+1555020%02d%02d", n%100, rng.IntN(8)), // 8 leads per client
			Body:      fmt.Sprintf("chaos %s %s: your appointment is confirmed for tomorrow at 3pm", w.runID, id),
		}
		if rng.Float64() < keyedShare {
			l.Key = "chaos-" + w.runID + "-" + id
		}
		w.rec.addLogical(l)
		first := time.Now()
		callers := 1 + rng.IntN(3)
		var wg sync.WaitGroup
		for k := range callers {
			seed := rng.Uint64()
			delay := time.Duration(0)
			if k > 0 && rng.IntN(2) == 0 {
				delay = time.Duration(rng.IntN(1500)) * time.Millisecond
			}
			wg.Go(func() {
				crng := rand.New(rand.NewPCG(seed, uint64(k)))
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				w.caller(ctx, l, first, crng)
			})
		}
		wg.Wait()
		if l.Key != "" && first.Add(lateRetry).Before(w.loadEnd) {
			proc := rng.IntN(len(w.c.procs))
			w.late.Go(func() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(first.Add(lateRetry))):
				}
				w.send(ctx, l, proc)
			})
		}
	}
}

// caller sends l until it gets a finished answer or its retries run out.
// A caller whose text failed at the provider (4xx) sometimes sends it
// again, as a workflow would: without a key, that may send once more.
func (w *workload) caller(ctx context.Context, l Logical, first time.Time, rng *rand.Rand) {
	proc := rng.IntN(len(w.c.procs))
	retriedFailed := false
	for attempt := 0; ctx.Err() == nil; attempt++ {
		q := w.send(ctx, l, proc)
		wait := time.Duration(200+rng.IntN(800)) * time.Millisecond
		switch {
		case q.answered() && q.Status == messages.StatusFailed && l.Key == "" && !retriedFailed && rng.IntN(2) == 0:
			retriedFailed = true
		case q.answered():
			return
		case q.Code >= 400 && q.Code < 500 && q.Code != http.StatusConflict && q.Code != http.StatusTooManyRequests:
			return // a client error will not get better
		case q.retryAfter > 0:
			wait = min(q.retryAfter, 2*time.Second)
		}
		if l.Key == "" && time.Since(first)+wait > retrySpan {
			return
		}
		if l.Key != "" && time.Since(first)+wait > 3*retrySpan {
			return
		}
		if rng.IntN(2) == 0 {
			proc = rng.IntN(len(w.c.procs)) // retry through another process
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// sent is a Request with what the caller needs to retry it.
type sent struct {
	Request
	retryAfter time.Duration
}

func (w *workload) send(ctx context.Context, l Logical, proc int) sent {
	body, _ := json.Marshal(map[string]string{"channel": "sms", "recipientPhone": l.Recipient, "body": l.Body})
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, w.c.procs[proc].url()+"/api/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.c.key)
	req.Header.Set("Content-Type", "application/json")
	if l.Key != "" {
		req.Header.Set("Idempotency-Key", l.Key)
	}
	q := sent{Request: Request{Logical: l.ID, Key: l.Key, Proc: proc, Start: time.Now()}}
	defer func() { q.End = time.Now(); w.rec.addRequest(q.Request) }()
	res, err := w.http.Do(req)
	if err != nil {
		q.Err = err.Error()
		return q
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		q.Err = err.Error()
		return q
	}
	q.Code, q.Body = res.StatusCode, b
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
		q.retryAfter = time.Duration(s) * time.Second
	}
	var v struct {
		Pending bool `json:"pending"`
		Message *struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"message"`
	}
	if q.Code >= 200 && q.Code < 300 && json.Unmarshal(b, &v) == nil {
		q.Pending = v.Pending
		if v.Message != nil {
			q.MessageID, q.Status = v.Message.ID, v.Message.Status
		}
	}
	return q
}

// readBack reads every message id through the live processes, 8 at a time.
func (w *workload) readBack(ctx context.Context, ids []string) map[string]ReadBack {
	out := make(map[string]ReadBack, len(ids))
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				var rb ReadBack
				for try := range 5 {
					rb = w.get(ctx, w.c.procs[(i+try)%len(w.c.procs)], ids[i])
					if rb.Err == "" {
						break
					}
					time.Sleep(500 * time.Millisecond)
				}
				mu.Lock()
				out[ids[i]] = rb
				mu.Unlock()
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func (w *workload) get(ctx context.Context, p *proc, id string) ReadBack {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodGet, p.url()+"/api/messages/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+w.c.key)
	res, err := w.http.Do(req)
	if err != nil {
		return ReadBack{Err: err.Error()}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	switch res.StatusCode {
	case http.StatusNotFound:
		return ReadBack{}
	case http.StatusOK:
		var v struct {
			Message struct {
				Status string `json:"status"`
			} `json:"message"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.Message.Status == "" {
			return ReadBack{Err: fmt.Sprintf("unreadable answer %q", clip(b))}
		}
		return ReadBack{Found: true, Status: v.Message.Status}
	}
	return ReadBack{Err: fmt.Sprintf("%d %s", res.StatusCode, clip(b))}
}
