package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"github.com/rs/zerolog"
)

// The embedded engine speaks the MongoDB protocol without authentication,
// so who can reach it is the whole of its access control. By default it
// listens only on a Unix socket inside the data folder: the folder is 0700
// and the socket 0600, so only the operating-system user that runs msgapi
// (and root) can connect. A loopback TCP address is an explicit opt-in for
// tools that cannot use a socket; any other address is refused.

// SocketName is the embedded engine's socket file inside the data folder.
// The MongoDB driver treats a host ending in "sock" as a Unix socket.
const SocketName = "mongodb.sock"

// EmbeddedOptions configure StartEmbedded.
type EmbeddedOptions struct {
	// Dir is the data folder (SQLite files and, by default, the socket);
	// created 0700, and tightened to 0700 if it is wider.
	Dir string
	// Socket overrides the socket path (default Dir/mongodb.sock), for a
	// data folder whose path is too long for a Unix socket. It must end in
	// ".sock"; its folder is created 0700 and must not be open to others.
	Socket string
	// TCP, when set, also serves the engine on this loopback address
	// ("127.0.0.1:0" picks a free port). Anything but loopback is refused.
	TCP string
	Log zerolog.Logger
}

// Embedded is the in-process FerretDB engine (SQLite backend).
type Embedded struct {
	dir    string
	socket string
	tcp    string
	relay  *relay // every connection's way in (relay.go)
	cancel context.CancelFunc
	done   chan struct{}
}

// engineSocketName is FerretDB's own socket, beside the public one: only
// the relay connects to it.
const engineSocketName = ".engine.sock"

// StartEmbedded starts FerretDB with its data under opts.Dir, serving the
// MongoDB protocol on a Unix socket (and on opts.TCP when set), and returns
// once it accepts connections.
func StartEmbedded(ctx context.Context, opts EmbeddedOptions) (*Embedded, error) {
	dir := opts.Dir
	if dir == "" {
		dir = "data"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded store: data folder %q: %w", dir, err)
	}
	if err := privateDir(abs, true, opts.Log); err != nil {
		return nil, fmt.Errorf("embedded store: data folder: %w", err)
	}
	sock := filepath.Join(abs, SocketName)
	if opts.Socket != "" {
		if sock, err = filepath.Abs(opts.Socket); err != nil {
			return nil, fmt.Errorf("embedded store: socket %q: %w", opts.Socket, err)
		}
		if !strings.HasSuffix(sock, ".sock") {
			return nil, fmt.Errorf("embedded store: socket path %q must end in .sock (MongoDB drivers recognise a socket by it)", sock)
		}
		if err := privateDir(filepath.Dir(sock), false, opts.Log); err != nil {
			return nil, fmt.Errorf("embedded store: socket folder: %w", err)
		}
	}
	if err := checkSocketPath(sock, opts.Socket != ""); err != nil {
		return nil, err
	}
	if err := clearStaleSocket(sock); err != nil {
		return nil, err
	}
	engineSock := filepath.Join(filepath.Dir(sock), engineSocketName)
	if err := checkSocketPath(engineSock, opts.Socket != ""); err != nil {
		return nil, err
	}
	if err := clearStaleSocket(engineSock); err != nil {
		return nil, err
	}

	tcp := opts.TCP
	if tcp != "" {
		if err := LoopbackTCP(tcp); err != nil {
			return nil, fmt.Errorf("embedded store: %w", err)
		}
		// Fail fast with a clear message instead of FerretDB's own.
		l, err := net.Listen("tcp", tcp)
		if err != nil {
			return nil, fmt.Errorf("embedded store: cannot listen on %s (change MSGAPI_EMBEDDED_ADDR, or leave it empty for the Unix socket alone): %w", tcp, err)
		}
		if strings.HasSuffix(tcp, ":0") {
			tcp = l.Addr().String() // pin the free port we were given
		}
		_ = l.Close()
	}

	// The engine logs every ok:0 reply, including the duplicate-key errors
	// that are our normal race outcome, at WARN with the whole document
	// (message bodies included). Our own events say what happened, so only
	// its errors get through.
	engineLog := slog.New(slog.NewJSONHandler(opts.Log, &slog.HandlerOptions{Level: slog.LevelError}))

	// New binds the engine's private socket; the relay serves the public
	// socket and TCP address once the engine listens. Sockets are created
	// with the process umask's mode and tightened at once; until then the
	// 0700 folder keeps everyone else out.
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: engineSock},
		Handler:   "sqlite",
		SQLiteURL: "file:" + filepath.ToSlash(abs) + "/",
		Logger:    engineLog,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &Embedded{dir: abs, socket: sock, tcp: tcp, relay: newRelay(engineSock), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = f.Run(runCtx)
	}()

	ready := make(chan struct{})
	go func() { _ = f.MongoDBURI(); close(ready) }() // blocks until the listeners are up
	select {
	case <-ready:
	case <-e.done:
		return nil, fmt.Errorf("embedded store: engine stopped during start-up on %s", sock)
	case <-time.After(30 * time.Second):
		e.Stop()
		return nil, fmt.Errorf("embedded store: engine did not start listening on %s within 30s", engineSock)
	}
	if err := os.Chmod(engineSock, 0o600); err != nil {
		e.Stop()
		return nil, fmt.Errorf("embedded store: restrict the engine's socket to its owner: %w", err)
	}
	ul, err := net.Listen("unix", sock)
	if err != nil {
		e.Stop()
		return nil, fmt.Errorf("embedded store: listen on %s: %w", sock, err)
	}
	e.relay.serve(ul)
	if err := os.Chmod(sock, 0o600); err != nil {
		e.Stop()
		return nil, fmt.Errorf("embedded store: restrict the socket to its owner: %w", err)
	}
	if tcp != "" {
		tl, err := net.Listen("tcp", tcp)
		if err != nil {
			e.Stop()
			return nil, fmt.Errorf("embedded store: cannot listen on %s: %w", tcp, err)
		}
		e.relay.serve(tl)
	}
	return e, nil
}

// privateDir makes sure dir exists with mode 0700. An existing folder that
// others can enter is tightened when it is the data folder (ours), and
// refused otherwise (a folder the operator chose for the socket).
func privateDir(dir string, tighten bool, log zerolog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		if !tighten {
			return fmt.Errorf("%s is open to other users (mode %04o); use a folder only msgapi's user can enter (chmod 700)", dir, mode)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%s is open to other users (mode %04o) and cannot be restricted: %w", dir, mode, err)
		}
		log.Warn().Str("dataDir", dir).Str("was", fmt.Sprintf("%04o", mode)).Msg("the data folder was open to other users; its mode is now 0700")
	}
	return nil
}

// maxSocketPath is the longest socket path the kernel accepts: sun_path is
// 108 bytes on Linux and 104 on the BSDs and macOS, NUL included.
func maxSocketPath() int {
	if runtime.GOOS == "linux" {
		return 107
	}
	return 103
}

func checkSocketPath(sock string, chosen bool) error {
	if n, max := len(sock), maxSocketPath(); n > max {
		hint := "set MSGAPI_EMBEDDED_SOCKET to a shorter path in a folder only msgapi's user can enter (e.g. /run/msgapi/mongodb.sock), or use a shorter MSGAPI_DATA_DIR"
		if chosen {
			hint = "choose a shorter MSGAPI_EMBEDDED_SOCKET"
		}
		return fmt.Errorf("embedded store: the Unix socket path %s is %d bytes, over the %d-byte limit of Unix sockets on this system; %s", sock, n, max, hint)
	}
	return nil
}

// clearStaleSocket removes a socket left by a process that died. A socket
// that still answers belongs to a running engine on the same data: starting
// a second engine on it would corrupt nothing only by luck, so it is refused.
func clearStaleSocket(sock string) error {
	fi, err := os.Lstat(sock)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedded store: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("embedded store: %s exists and is not a socket; move it away", sock)
	}
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("embedded store: another msgapi already serves this data on %s; attach to it with MONGODB_URI=%s instead of starting a second engine", sock, SocketURI(sock))
	}
	if err := os.Remove(sock); err != nil {
		return fmt.Errorf("embedded store: remove the stale socket %s: %w", sock, err)
	}
	return nil
}

// LoopbackTCP accepts only a loopback host:port: a loopback IP literal or
// "localhost". An empty host (":27018") would listen on every interface.
func LoopbackTCP(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("MSGAPI_EMBEDDED_ADDR=%q is not host:port: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("MSGAPI_EMBEDDED_ADDR=%q is not a loopback address: the embedded engine has no authentication, so it only listens on 127.0.0.1, [::1] or localhost (leave it empty to use the Unix socket alone)", addr)
}

// SocketURI is the MongoDB connection string of a Unix socket: the path,
// URL-escaped, is the host.
func SocketURI(path string) string {
	return "mongodb://" + url.QueryEscape(path) + "/"
}

// URI is the connection string msgapi itself uses: the socket.
func (e *Embedded) URI() string { return SocketURI(e.socket) }

// Socket is the absolute path of the engine's Unix socket.
func (e *Embedded) Socket() string { return e.socket }

// TCP is the loopback address the engine also serves, "" when none.
func (e *Embedded) TCP() string { return e.tcp }

// Dir is the absolute data folder.
func (e *Embedded) Dir() string { return e.dir }

// DatabaseFile is the SQLite file that holds database db.
func (e *Embedded) DatabaseFile(db string) string { return filepath.Join(e.dir, db+".sqlite") }

// Stop closes the listeners (removing the socket) and all connections, then
// the SQLite handles.
func (e *Embedded) Stop() {
	e.relay.Close()
	e.cancel()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
	}
}
