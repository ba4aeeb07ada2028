package store

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"github.com/rs/zerolog"
)

// Embedded is the in-process FerretDB engine (SQLite backend) that serves
// the MongoDB wire protocol on a loopback address.
type Embedded struct {
	dir    string
	uri    string
	cancel context.CancelFunc
	done   chan struct{}
}

// StartEmbedded starts FerretDB with its data under dir, listening on addr
// (use "127.0.0.1:0" for a free port), and returns once it accepts
// connections.
func StartEmbedded(ctx context.Context, dir, addr string, log zerolog.Logger) (*Embedded, error) {
	if dir == "" {
		dir = "data"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded store: data folder %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store: create data folder: %w", err)
	}
	if addr == "" {
		addr = "127.0.0.1:27018"
	}
	// Fail fast with a clear message instead of FerretDB's own.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("embedded store: cannot listen on %s (set MSGAPI_EMBEDDED_ADDR, or MONGODB_URI to use another store): %w", addr, err)
	}
	if addr == "127.0.0.1:0" || addr == "localhost:0" {
		addr = l.Addr().String() // pin the free port we were given
	}
	_ = l.Close()

	// The engine logs every ok:0 reply, including the duplicate-key errors
	// that are our normal race outcome, at WARN with the whole document
	// (message bodies included). Our own events say what happened, so only
	// its errors get through.
	engineLog := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelError}))

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: addr},
		Handler:   "sqlite",
		SQLiteURL: "file:" + filepath.ToSlash(abs) + "/",
		Logger:    engineLog,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &Embedded{dir: abs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = f.Run(runCtx)
	}()

	uriCh := make(chan string, 1)
	go func() { uriCh <- f.MongoDBURI() }() // blocks until the listener is up
	select {
	case e.uri = <-uriCh:
	case <-e.done:
		return nil, fmt.Errorf("embedded store: engine stopped during start-up on %s", addr)
	case <-time.After(30 * time.Second):
		e.Stop()
		return nil, fmt.Errorf("embedded store: engine did not start listening on %s within 30s", addr)
	}
	return e, nil
}

// URI is the engine's connection string.
func (e *Embedded) URI() string { return e.uri }

// Dir is the absolute data folder.
func (e *Embedded) Dir() string { return e.dir }

// DatabaseFile is the SQLite file that holds database db.
func (e *Embedded) DatabaseFile(db string) string { return filepath.Join(e.dir, db+".sqlite") }

// Stop closes the listener and all connections, then the SQLite handles.
func (e *Embedded) Stop() {
	e.cancel()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
	}
}
