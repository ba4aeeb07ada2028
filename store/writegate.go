package store

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// The embedded engine's writes are serialised by SQLite: one writer at a
// time, and a writer that finds the database locked sleeps in SQLite's busy
// handler (1, 2, 5, 10 … 100 ms steps) and tries again. Waiting there is
// not first come, first served, so under concurrency an unlucky request
// waits hundreds of milliseconds while later ones pass it (BENCHMARKS.md).
//
// So on the embedded engine msgapi queues its writes itself: every
// connection the driver opens goes through a dialer whose connections pass
// a write command to the engine only when they hold the process's single
// write slot, taken in arrival order, and give it back when the reply
// starts to arrive. SQLite then never sees two of our writes at once and its
// busy handler never sleeps; reads (find, getMore, hello …) are not gated and
// keep using both cores beside the writer. Every package's writes go through
// it without knowing: the gate sits under the driver, not at call sites.
// On MongoDB there is no gate: writes to different documents do not queue
// for one lock there.

// writeGate admits one write command at a time, in arrival order: a Go
// channel's blocked senders are woken first in, first out, and a release
// (a receive from the full one-slot buffer) moves the longest waiter's
// value straight into the buffer, so a newcomer never jumps the queue.
type writeGate struct {
	slot chan struct{}
	// What the queue cost (WriterStats): commands admitted, nanoseconds
	// spent waiting for the slot and holding it.
	admitted, waited, held atomic.Int64
	// queued is how many commands wait for the slot now (Yield).
	queued atomic.Int64
}

// WriterStats is what the write queue has cost since start-up: how many
// write commands passed, how long they waited for the writer in all, and
// how long the writer was held (busy) in all. Busy time over wall time is
// the writer's utilisation: near 1, writes are the limit.
type WriterStats struct {
	Commands   int64
	Wait, Busy time.Duration
}

func newWriteGate() *writeGate { return &writeGate{slot: make(chan struct{}, 1)} }

// acquire waits for the slot until deadline (none when zero) or until the
// connection is closed (the driver closes it when the operation's context
// is cancelled). The errors are the ones net.Conn.Write would give.
func (g *writeGate) acquire(deadline time.Time, closed <-chan struct{}) error {
	select {
	case g.slot <- struct{}{}:
		g.admitted.Add(1)
		return nil
	default:
	}
	start := time.Now()
	g.queued.Add(1)
	defer func() {
		g.queued.Add(-1)
		g.waited.Add(int64(time.Since(start)))
	}()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	select {
	case g.slot <- struct{}{}:
		g.admitted.Add(1)
		return nil
	case <-closed:
		return net.ErrClosed
	case <-expired:
		return os.ErrDeadlineExceeded // a net.Error whose Timeout() is true
	}
}

func (g *writeGate) release() { <-g.slot }

// maxYield bounds one Yield: background work still makes progress under a
// queue that never empties, at most one of its commands per maxYield.
const maxYield = 100 * time.Millisecond

// Yield is called by background work (the reaper) between two of its
// write commands. While request writes wait for the embedded engine's
// writer, it waits too, up to maxYield, so that the queue serves them
// first: fairness per command would otherwise give a reaper command that
// holds the writer ten times longer than a request's ten times the share.
// With nobody queued, and on MongoDB, it returns at once.
func (s *Store) Yield(ctx context.Context) error {
	if s.gate == nil {
		return ctx.Err()
	}
	for deadline := time.Now().Add(maxYield); s.gate.queued.Load() > 0 && time.Now().Before(deadline); {
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (g *writeGate) stats() WriterStats {
	return WriterStats{Commands: g.admitted.Load(), Wait: time.Duration(g.waited.Load()), Busy: time.Duration(g.held.Load())}
}

// gatedDialer dials the engine and wraps each connection in the gate.
type gatedDialer struct {
	gate   *writeGate
	dialer net.Dialer
}

func (d *gatedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.dialer.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, gate: d.gate, closed: make(chan struct{})}, nil
}

// gatedConn is one driver connection. The driver writes a whole command in
// one Write and reads its reply before writing the next command on the same
// connection, so a connection holds the slot for at most one command.
type gatedConn struct {
	net.Conn
	gate *writeGate

	mu            sync.Mutex
	held          bool      // this connection holds the slot
	heldSince     time.Time // when it took it
	writeDeadline time.Time // the driver's, from the operation's context
	closed        chan struct{}
	closeOnce     sync.Once
}

func (c *gatedConn) Write(p []byte) (int, error) {
	if isWriteCommand(p) {
		c.mu.Lock()
		deadline := c.writeDeadline
		c.mu.Unlock()
		if err := c.gate.acquire(deadline, c.closed); err != nil {
			return 0, err
		}
		c.mu.Lock()
		c.held, c.heldSince = true, time.Now()
		c.mu.Unlock()
	}
	n, err := c.Conn.Write(p)
	if err != nil {
		c.releaseHeld()
	}
	return n, err
}

// Read gives the slot back at the first byte of the reply (the engine
// answers once the command has committed) or at a read error: a reply that
// times out no longer holds the writer for everyone else.
func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 || err != nil {
		c.releaseHeld()
	}
	return n, err
}

func (c *gatedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.writeDeadline = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *gatedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.writeDeadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *gatedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	c.releaseHeld()
	return c.Conn.Close()
}

func (c *gatedConn) releaseHeld() {
	c.mu.Lock()
	held, since := c.held, c.heldSince
	c.held = false
	c.mu.Unlock()
	if held {
		c.gate.held.Add(int64(time.Since(since)))
		c.gate.release()
	}
}

// readCommands are the commands that do not write. Anything else, a
// command this list does not know included, is treated as a write and
// queued: an unknown read only waits its turn, an unknown write let through
// would meet SQLite's busy handler again.
var readCommands = map[string]bool{
	"find": true, "getMore": true, "killCursors": true, "count": true, "distinct": true,
	"aggregate": true, "listCollections": true, "listIndexes": true, "listDatabases": true,
	"hello": true, "isMaster": true, "ismaster": true, "ping": true, "buildInfo": true,
	"buildinfo": true, "serverStatus": true, "dbStats": true, "collStats": true,
	"connectionStatus": true, "getParameter": true, "explain": true, "endSessions": true,
	"getLog": true, "whatsmyuri": true, "hostInfo": true, "getCmdLineOpts": true,
	GetCommand: true,
}

// isWriteCommand reads the command name of an OP_MSG wire message: the
// first key of its body section. Other opcodes (the legacy OP_QUERY of a
// connection's handshake) are not commands msgapi sends.
func isWriteCommand(wm []byte) bool {
	_, _, _, op, rem, ok := wiremessage.ReadHeader(wm)
	if !ok || op != wiremessage.OpMsg {
		return false
	}
	if _, rem, ok = wiremessage.ReadMsgFlags(rem); !ok {
		return false
	}
	for len(rem) > 0 {
		var kind wiremessage.SectionType
		if kind, rem, ok = wiremessage.ReadMsgSectionType(rem); !ok {
			return false
		}
		switch kind {
		case wiremessage.SingleDocument:
			body, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
			if !ok {
				return false
			}
			first, err := body.IndexErr(0)
			if err != nil {
				return false
			}
			return !readCommands[first.Key()]
		case wiremessage.DocumentSequence:
			if _, _, rem, ok = wiremessage.ReadMsgSectionRawDocumentSequence(rem); !ok {
				return false
			}
		default:
			return false
		}
	}
	return false
}
