package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/msgapi/msgapi/api/apitest"
	"github.com/msgapi/msgapi/store"
	"github.com/msgapi/msgapi/store/storetest"
)

// proxy forwards TCP connections to the test store (over TCP or its Unix
// socket) and can stall them: a
// stalled connection accepts bytes and forwards nothing, like a store that
// hangs (an election, a full disk, a partition) without closing sockets.
type proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	stalled bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	network := "tcp"
	if strings.HasSuffix(p.target, ".sock") {
		network = "unix" // the embedded engine's socket
	}
	up, err := net.Dial(network, p.target)
	if err != nil {
		return
	}
	defer up.Close()
	go p.pipe(c, up)
	p.pipe(up, c)
}

// pipe copies src to dst while the proxy is not stalled.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.isStalled() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *proxy) isStalled() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.stalled }
func (p *proxy) stall(on bool)   { p.mu.Lock(); p.stalled = on; p.mu.Unlock() }

// A store that stalls cannot hold a handler: every store call has a
// deadline (the driver's operation timeout), Release and the outcome write
// included, so each request answers within a bound.
func TestStalledStoreHandlersReturn(t *testing.T) {
	a := apitest.New(t, apitest.Options{})
	uri, dir := storetest.URI(t)
	// The store's one host: host:port, or the embedded engine's escaped
	// socket path (which url.Parse refuses).
	rest, _ := strings.CutPrefix(uri, "mongodb://")
	host, tail, _ := strings.Cut(rest, "/")
	target, err := url.QueryUnescape(host)
	if err != nil || target == "" || strings.ContainsAny(target, ",@") {
		t.Fatalf("test store URI %q has not one plain host", uri)
	}
	px := newProxy(t, target)
	st, err := store.Open(context.Background(), store.Options{URI: "mongodb://" + px.ln.Addr().String() + "/" + tail, SQLiteDir: dir, Database: a.Store.DB.Name(),
		OpTimeout: 300 * time.Millisecond, ConnectTimeout: 2 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.stall(false); _ = st.Close(context.Background()) })
	b := apitest.New(t, apitest.Options{Store: st, Sender: a.Sender})
	if r := b.Do(http.MethodPost, "/api/messages", a.Key, `{"channel":"sms","recipientPhone":"+15550100000","body":"warm"}`, nil); r.Status != http.StatusCreated {
		t.Fatalf("send through the proxy: %d %s", r.Status, r.Body)
	}

	px.stall(true)
	reqs := []struct{ method, path, body string }{
		{http.MethodPost, "/api/messages", `{"channel":"sms","recipientPhone":"+15550100001","body":"during the stall"}`},
		{http.MethodPost, "/api/messages", `{"channel":"sms","recipientPhone":"+15550100000","body":"warm"}`},
		{http.MethodGet, "/api/messages/msg_doesnotexist", ""},
		{http.MethodDelete, "/api/dedup-locks/0000000000000000000000000000000000000000000000000000000000000000", ""},
	}
	var wg sync.WaitGroup
	for _, rq := range reqs {
		wg.Go(func() {
			start := time.Now()
			r := b.Do(rq.method, rq.path, a.Key, rq.body, nil)
			took := time.Since(start)
			// Each request makes a few store calls, each within 300 ms.
			if took > 5*time.Second {
				t.Errorf("%s %s took %s with the store stalled", rq.method, rq.path, took)
			}
			if r.Status != http.StatusServiceUnavailable {
				t.Errorf("%s %s with the store stalled: %d %s, want 503", rq.method, rq.path, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
}
