package store_test

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi/store"
)

func startEngine(t *testing.T, o store.EmbeddedOptions) *store.Embedded {
	t.Helper()
	e, err := store.StartEmbedded(context.Background(), o)
	if err != nil {
		t.Fatalf("start embedded engine: %v", err)
	}
	t.Cleanup(e.Stop)
	return e
}

func openURI(t *testing.T, uri, db string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), store.Options{URI: uri, Database: db, ConnectTimeout: 5 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// By default the engine serves only a Unix socket, in a 0700 data folder
// with mode 0600, and a second client (another msgapi process, mongosh)
// attaches through it and sees the first one's writes.
func TestEmbeddedServesAPrivateSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil { // an existing, too open folder
		t.Fatal(err)
	}
	first, err := store.Open(context.Background(), store.Options{DataDir: dir, Database: "perm", ConnectTimeout: 10 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background())
	e := first.Engine()
	if e == nil || e.TCP() != "" {
		t.Fatalf("engine %+v, want the embedded engine with no TCP listener", e)
	}
	if want := filepath.Join(dir, store.SocketName); e.Socket() != want {
		t.Errorf("socket %s, want %s", e.Socket(), want)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("data folder mode %04o, want 0700", got)
	}
	si, err := os.Lstat(e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if si.Mode().Type() != fs.ModeSocket || si.Mode().Perm() != 0o600 {
		t.Errorf("socket %s, want a socket with mode 0600", si.Mode())
	}
	if first.URI != store.SocketURI(e.Socket()) || !strings.HasPrefix(first.URI, "mongodb://%2F") {
		t.Errorf("store URI %q, want the escaped socket path", first.URI)
	}

	ctx := context.Background()
	if _, err := first.Collection("c").InsertOne(ctx, bson.D{{Key: "_id", Value: "x"}, {Key: "v", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	second := openURI(t, store.SocketURI(e.Socket()), "perm")
	var got struct{ V int }
	if err := second.Collection("c").FindOne(ctx, bson.D{{Key: "_id", Value: "x"}}).Decode(&got); err != nil || got.V != 1 {
		t.Fatalf("second client through the socket: %+v, %v; want the first client's document", got, err)
	}

	// A second engine on the same data is refused while the first runs.
	if _, err := store.StartEmbedded(ctx, store.EmbeddedOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "MONGODB_URI=mongodb://%2F") {
		t.Errorf("second engine on a served data folder: %v, want a refusal that says how to attach", err)
	}
}

// A socket left by a process that died does not block the next start.
func TestEmbeddedRemovesAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, store.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the file stays, nobody answers
	e := startEngine(t, store.EmbeddedOptions{Dir: dir})
	openURI(t, e.URI(), "stale")
}

func TestEmbeddedTCPMustBeLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.10:27018", "example.com:27018", "127.0.0.1"} {
		_, err := store.StartEmbedded(context.Background(), store.EmbeddedOptions{Dir: t.TempDir(), TCP: addr})
		if err == nil || !strings.Contains(err.Error(), "MSGAPI_EMBEDDED_ADDR") {
			t.Errorf("TCP %q: %v, want a refusal naming MSGAPI_EMBEDDED_ADDR", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:27018", "[::1]:27018", "localhost:27018", "127.5.5.5:1"} {
		if err := store.LoopbackTCP(addr); err != nil {
			t.Errorf("LoopbackTCP(%q) = %v, want it accepted", addr, err)
		}
	}
	// The opt-in serves both: the socket and the loopback port.
	e := startEngine(t, store.EmbeddedOptions{Dir: t.TempDir(), TCP: "127.0.0.1:0"})
	if e.TCP() == "" || strings.HasSuffix(e.TCP(), ":0") {
		t.Fatalf("TCP %q, want the pinned port", e.TCP())
	}
	openURI(t, "mongodb://"+e.TCP()+"/", "tcp")
	openURI(t, e.URI(), "tcp")
}

// A data folder too deep for a Unix socket fails with an error that says
// what to do, and MSGAPI_EMBEDDED_SOCKET is that way out.
func TestEmbeddedLongDataDir(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	_, err := store.StartEmbedded(context.Background(), store.EmbeddedOptions{Dir: deep})
	if err == nil || !strings.Contains(err.Error(), "MSGAPI_EMBEDDED_SOCKET") {
		t.Fatalf("long data folder: %v, want an error naming MSGAPI_EMBEDDED_SOCKET", err)
	}
	short, err := os.MkdirTemp("", "ms-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	sock := filepath.Join(short, "run", "db.sock")
	e := startEngine(t, store.EmbeddedOptions{Dir: deep, Socket: sock})
	openURI(t, e.URI(), "deep")
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket folder %v %v, want mode 0700", fi.Mode(), err)
	}

	// A socket folder others can enter is refused, not silently used.
	open := filepath.Join(short, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := store.StartEmbedded(context.Background(), store.EmbeddedOptions{Dir: t.TempDir(), Socket: filepath.Join(open, "db.sock")}); err == nil || !strings.Contains(err.Error(), "open to other users") {
		t.Errorf("socket in a 0755 folder: %v, want a refusal", err)
	}
}
