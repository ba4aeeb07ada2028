// Command load drives a msgapi server with concurrent clients and measures
// what a send, a duplicate and an Idempotency-Key replay cost, against what
// the store itself can do, while proving that every logical message reached
// the provider exactly once.
//
//	go run ./test/load            # builds and starts its own server; about a minute
//	go run ./test/load -h         # sizes, and how to aim it at a running server
//
// By default it builds ./cmd/msgapi into a temporary folder and starts it on
// the embedded store (a temporary data folder, free loopback ports), with the
// SMS provider set to the signed webhook, pointed at a receiver of its own.
// Then, with -c clients, it runs:
//
//	warm-up  one send to each of -leads new recipients, creating the leads
//	unique   -unique distinct texts to those known leads          (8 store round trips each)
//	resend   -resends of those texts again: the original exists   (4)
//	storm    -storms bursts of -storm-size identical requests released together
//	keyed    -keys distinct texts with an Idempotency-Key         (8 + 3)
//	replay   -replays of the keyed requests, answered from the key (1)
//
// Before and after them it measures the store's raw single-document insert
// rate (InsertOne of a small document with a string _id, shaped like a lock,
// into a scratch collection) with the same number of clients, and prints each
// scenario's throughput as a fraction of that rate. Machines are noisy:
// compare ratios within one run, and distrust a run whose two raw rates
// differ much. Around each scenario it also reads the store's own count of
// the commands it served (serverStatus), so the table shows the round trips
// each request really cost next to the ones the design states.
//
// The receiver checks each delivery's HMAC-SHA256 signature and counts
// deliveries per message id and per logical message (one text the generator
// sent, however many requests carried it). Every logical message must be
// delivered exactly once, every answer must name the delivered message, and
// every replay must be the original answer byte for byte; otherwise load
// exits with status 1.
//
// Against a server that is already running, pass -url, -key, -store-uri,
// -receiver-addr and -webhook-secret; that server must run with
// MSGAPI_SENDER_SMS=webhook, MSGAPI_WEBHOOK_URL=http://<-receiver-addr>/ and
// MSGAPI_WEBHOOK_SECRET=<-webhook-secret> (and MSGAPI_RATE_LIMIT=0, or a
// workspace rateLimit above the load), and nothing else may send through
// it meanwhile. Every address must be loopback: this is a benchmark, not a
// load test of somebody's deployment. Every phase is bounded by its count and
// by -timeout.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "load:", err)
		}
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	clients, leads, unique, resends int
	storms, stormSize               int
	keys, replays, raw              int
	gets, expired, grow, probe      int
	timeout, requestTimeout         time.Duration

	url, key, storeURI, storeDB string // a running server, when url is set
	receiverAddr, secret        string
	serverEnv                   []string // NAME=VALUE settings of the server this tool starts
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.clients, "c", 16, "concurrent clients")
	fs.IntVar(&c.leads, "leads", 100, "recipients (leads) created in the warm-up; the sends cycle through them")
	fs.IntVar(&c.unique, "unique", 2000, "unique sends")
	fs.IntVar(&c.resends, "resends", 1000, "resends of unique texts after they were sent (duplicates with the original written)")
	fs.IntVar(&c.storms, "storms", 100, "duplicate storms")
	fs.IntVar(&c.stormSize, "storm-size", 10, "identical requests per storm, released together")
	fs.IntVar(&c.keys, "keys", 200, "sends with an Idempotency-Key (the replays cycle through them)")
	fs.IntVar(&c.replays, "replays", 1000, "Idempotency-Key replays")
	fs.IntVar(&c.raw, "raw", 2000, "raw store inserts in each of the two raw phases")
	fs.IntVar(&c.gets, "gets", 1000, "GET /api/messages/{id} of the unique messages")
	fs.IntVar(&c.expired, "expired", 0, "expired dedup locks to seed, then unique sends (-unique/2) while the server's reaper deletes them; 0 skips it")
	fs.IntVar(&c.grow, "grow", 0, "stored messages to grow to with unique sends before probing latency again (e.g. 100000); 0 skips it")
	fs.IntVar(&c.probe, "probe", 200, "with -grow: requests of each kind (unique, duplicate, GET) one at a time, on the near-empty store and at -grow")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "bound on the whole run, server build included")
	fs.DurationVar(&c.requestTimeout, "request-timeout", 30*time.Second, "bound on one request")
	fs.StringVar(&c.url, "url", "", "base URL of a running msgapi (loopback); empty builds and starts one")
	fs.StringVar(&c.key, "key", "", "with -url: a workspace API key")
	fs.StringVar(&c.storeURI, "store-uri", "", "with -url: the server's store; for its embedded engine the socket, mongodb://%2Fpath%2Fto%2Fdata%2Fmongodb.sock/")
	fs.StringVar(&c.storeDB, "store-db", "msgapi", "with -url: database for the raw inserts' scratch collection")
	fs.StringVar(&c.receiverAddr, "receiver-addr", "127.0.0.1:0", "webhook receiver's listen address (with -url: the one the server posts to)")
	fs.StringVar(&c.secret, "webhook-secret", "", "with -url: the server's MSGAPI_WEBHOOK_SECRET")
	fs.Func("server-env", "NAME=VALUE in the environment of the server this tool starts (repeatable), e.g. GOGC=400", func(v string) error {
		name, _, ok := strings.Cut(v, "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return fmt.Errorf("want NAME=VALUE, got %q", v)
		}
		c.serverEnv = append(c.serverEnv, v)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(out, `usage: go run ./test/load [flags]

Builds and starts msgapi on the embedded store, sends unique messages,
duplicates, duplicate storms and Idempotency-Key replays, and prints req/s
and latency per scenario next to the store's raw insert rate. Exits 1 unless
every logical message was delivered exactly once.

A running server instead: -url -key -store-uri -receiver-addr -webhook-secret,
the server started with MSGAPI_SENDER_SMS=webhook,
MSGAPI_WEBHOOK_URL=http://<receiver-addr>/ and MSGAPI_WEBHOOK_SECRET=<secret>.
Loopback addresses only.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for name, n := range map[string]int{"-c": c.clients, "-leads": c.leads, "-storm-size": c.stormSize, "-raw": c.raw} {
		if n < 1 {
			return c, fmt.Errorf("%s must be at least 1", name)
		}
	}
	for name, n := range map[string]int{"-unique": c.unique, "-resends": c.resends, "-storms": c.storms, "-keys": c.keys, "-replays": c.replays,
		"-gets": c.gets, "-expired": c.expired, "-grow": c.grow, "-probe": c.probe} {
		if n < 0 {
			return c, fmt.Errorf("%s must not be negative", name)
		}
	}
	switch {
	case c.leads > 10000:
		return c, errors.New("-leads must be at most 10000 (the recipients are +1555010xxxx)")
	case c.resends > 0 && c.unique == 0:
		return c, errors.New("-resends needs -unique > 0")
	case c.replays > 0 && c.keys == 0:
		return c, errors.New("-replays needs -keys > 0")
	case (c.gets > 0 || c.expired > 0) && c.unique < 2:
		return c, errors.New("-gets and -expired need -unique of at least 2")
	case c.grow > 0 && c.probe < 1:
		return c, errors.New("-grow needs -probe of at least 1")
	case c.expired > 0 && c.url != "":
		return c, errors.New("-expired needs the server this tool starts (its reaper runs every 10 s)")
	case c.timeout <= 0 || c.requestTimeout <= 0:
		return c, errors.New("-timeout and -request-timeout must be positive")
	}
	if err := loopbackHostPort("-receiver-addr", c.receiverAddr); err != nil {
		return c, err
	}
	if c.url == "" {
		if c.key != "" || c.storeURI != "" || c.secret != "" {
			return c, errors.New("-key, -store-uri and -webhook-secret go with -url")
		}
		return c, nil
	}
	if len(c.serverEnv) > 0 {
		return c, errors.New("-server-env needs the server this tool starts, not -url")
	}
	if c.key == "" || c.storeURI == "" || c.secret == "" || strings.HasSuffix(c.receiverAddr, ":0") {
		return c, errors.New("with -url, also give -key, -store-uri, -webhook-secret and the -receiver-addr the server posts to")
	}
	u, err := url.Parse(c.url)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return c, fmt.Errorf("-url %q is not an http(s) URL", c.url)
	}
	c.url = strings.TrimSuffix(c.url, "/")
	if err := loopbackHostPort("-url", u.Host); err != nil {
		return c, err
	}
	// Not url.Parse: it refuses the escaped socket path in the host part.
	rest, ok := strings.CutPrefix(c.storeURI, "mongodb://")
	hosts, _, _ := strings.Cut(rest, "/")
	if !ok || strings.ContainsAny(hosts, "@?") {
		return c, fmt.Errorf("-store-uri %q is not a mongodb:// URI without credentials", c.storeURI)
	}
	for _, h := range strings.Split(hosts, ",") {
		if err := loopbackHostPort("-store-uri", h); err != nil {
			return c, err
		}
	}
	return c, nil
}

// loopbackHostPort refuses any host that is not localhost or a loopback IP.
func loopbackHostPort(flagName, hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport // no port
	}
	if host == "localhost" || strings.HasSuffix(host, ".sock") {
		return nil // a Unix socket is local by nature
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s: %q is not a loopback address", flagName, hostport)
}

// target is the server under load.
type target struct {
	url, key string
	storeURI string
	storeDB  string
	embedded bool // started by us on the embedded store
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	runID := randomHex(4)
	secret := cfg.secret
	if secret == "" {
		secret = randomHex(16)
	}
	rcv, err := startReceiver(cfg.receiverAddr, secret, bodyPrefix(runID))
	if err != nil {
		return err
	}
	defer rcv.close()

	t := target{url: cfg.url, key: cfg.key, storeURI: cfg.storeURI, storeDB: cfg.storeDB}
	if cfg.url == "" {
		env := slices.Clone(cfg.serverEnv) // later entries win: the tool's own settings below
		if cfg.expired > 0 {
			// The pass starts within 10 s of the seeding; every second would
			// scan every reaped collection each second, slowing every scenario.
			env = append(env, "MSGAPI_REAPER_INTERVAL=10s")
		}
		srv, err := startServer(ctx, stdout, rcv.url(), secret, env...)
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.stop(); err != nil {
				fmt.Fprintln(os.Stderr, "load:", err)
			}
		}()
		t = target{url: srv.url, key: srv.key, storeURI: srv.storeURI, storeDB: "msgapi", embedded: true}
	}

	l := newLoad(cfg, t, runID, rcv)
	rep, err := l.all(ctx)
	if err != nil {
		return err
	}
	rep.print(stdout)
	if n := len(rep.failures); n > 0 {
		return fmt.Errorf("%d check(s) failed", n)
	}
	return nil
}

// newHTTPClient keeps enough idle connections for every client, so the
// figures measure requests, not TCP handshakes.
func newHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tr.DisableCompression = true
	return &http.Client{Transport: tr}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand docs)
	return hex.EncodeToString(b)
}
