package ratelimit_test

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/msgapi/msgapi/ratelimit"
)

func TestLocalBucket(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	l := ratelimit.New(ratelimit.Options{Now: func() time.Time { return now }})
	lim := ratelimit.Limit{PerSecond: 2, Burst: 4}
	ctx := context.Background()

	for i := range 4 {
		if d, err := l.Allow(ctx, "ws_a", lim); err != nil || !d.Allowed {
			t.Fatalf("request %d of the burst: %+v %v, want allowed", i+1, d, err)
		}
	}
	d, _ := l.Allow(ctx, "ws_a", lim)
	if d.Allowed || d.RetryAfter != 500*time.Millisecond || d.Backend != ratelimit.BackendLocal {
		t.Errorf("past the burst: %+v, want refused with RetryAfter 500ms (2/s)", d)
	}
	// Another workspace has its own bucket.
	if d, _ := l.Allow(ctx, "ws_b", lim); !d.Allowed {
		t.Errorf("another workspace: %+v, want allowed", d)
	}
	// A refused request takes no token: after 500ms exactly one is back.
	now = now.Add(500 * time.Millisecond)
	if d, _ := l.Allow(ctx, "ws_a", lim); !d.Allowed {
		t.Errorf("after RetryAfter: %+v, want allowed", d)
	}
	if d, _ := l.Allow(ctx, "ws_a", lim); d.Allowed {
		t.Errorf("second after RetryAfter: %+v, want refused", d)
	}
	// A changed limit applies at once.
	now = now.Add(10 * time.Second)
	got := 0
	for range 20 {
		if d, _ := l.Allow(ctx, "ws_a", ratelimit.Limit{PerSecond: 1, Burst: 1}); d.Allowed {
			got++
		}
	}
	if got != 1 {
		t.Errorf("burst 1: %d allowed, want 1", got)
	}
	// The zero Limit is no limit.
	for range 100 {
		if d, _ := l.Allow(ctx, "ws_c", ratelimit.Limit{}); !d.Allowed {
			t.Fatal("zero limit refused a request")
		}
	}
}

// fire sends n requests for one workspace, spread over the limiters (one
// per process) and released together; it returns how many were allowed
// and how long the burst took.
func fire(t *testing.T, n int, lim ratelimit.Limit, ls ...*ratelimit.Limiter) (int, time.Duration) {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := ls[i%len(ls)].Allow(context.Background(), "ws_shared", lim)
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			if d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	return int(allowed.Load()), time.Since(began)
}

// Without Redis each process has its own bucket: two processes admit twice
// the burst between them (documented).
func TestLocalBucketsArePerProcess(t *testing.T) {
	lim := ratelimit.Limit{PerSecond: 1, Burst: 5}
	got, took := fire(t, 40, lim, ratelimit.New(ratelimit.Options{}), ratelimit.New(ratelimit.Options{}))
	if extra := int(took.Seconds()) * 2; got < 10 || got > 10+extra {
		t.Errorf("two processes without Redis admitted %d of 40, want 10 (2 × burst 5)", got)
	}
}

// With Redis the bucket is shared: two processes admit the burst once.
func TestRedisBucketIsShared(t *testing.T) {
	rc := startRedis(t)
	lim := ratelimit.Limit{PerSecond: 1, Burst: 5}
	got, took := fire(t, 40, lim, ratelimit.New(ratelimit.Options{Redis: rc}), ratelimit.New(ratelimit.Options{Redis: rc}))
	if extra := int(took.Seconds()) + 1; got < 5 || got > 5+extra {
		t.Errorf("two processes on one Redis admitted %d of 40 in %v, want 5 (the burst, once)", got, took)
	}
	d, err := ratelimit.New(ratelimit.Options{Redis: rc}).Allow(context.Background(), "ws_shared", lim)
	if err != nil || d.Allowed || d.Backend != ratelimit.BackendRedis || d.RetryAfter <= 0 || d.RetryAfter > time.Second {
		t.Errorf("a third process: %+v %v, want refused by redis with 0 < RetryAfter ≤ 1s", d, err)
	}
}

// A Redis that does not answer costs no send: the process's own bucket
// decides and the error is reported.
func TestRedisDownFallsBackToLocal(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(freePort(t)), MaxRetries: -1, DialerRetries: 1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rc.Close() })
	now := time.Now()
	l := ratelimit.New(ratelimit.Options{Redis: rc, Now: func() time.Time { return now }})
	lim := ratelimit.Limit{PerSecond: 1, Burst: 2}
	var allowed int
	for range 5 {
		d, err := l.Allow(context.Background(), "ws_down", lim)
		if err == nil || d.Backend != ratelimit.BackendLocal {
			t.Fatalf("Redis down: %+v %v, want a local decision and the error", d, err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("Redis down: %d of 5 allowed, want the local burst of 2", allowed)
	}
}

// startRedis starts Debian's redis-server on a free loopback port without
// persistence (CI installs it, .ci/run).
func startRedis(t *testing.T) *redis.Client {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rc.Close() })
	for deadline := time.Now().Add(10 * time.Second); rc.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer within 10s", addr)
		}
	}
	return rc
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
