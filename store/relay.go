package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// The embedded engine reads, filters and writes a conditional update or
// delete in separate steps, so two write commands that run at once can both
// act on what the other is about to change (SPEC: "Measured facts about the
// embedded engine"). A per-process write queue (writegate.go) cannot stop
// that: a second msgapi process attached through MONGODB_URI has its own
// queue, and a queue in the driver's process gives its slot back when the
// driver stops waiting (a timeout) while the engine still runs the command.
//
// So the engine's host puts a relay in front of FerretDB: FerretDB listens
// only on a private socket, and every connection, of this process or any
// attached one, comes through the relay, which passes one write command at
// a time to the engine and holds the slot until the engine's reply has
// arrived, whatever the client does meanwhile (a client that hangs up keeps
// its engine connection open until then). Reads pass beside it. Every write
// command then runs alone, so a conditional single-document write is atomic
// on the embedded engine as it is on MongoDB.

// maxWireMessage bounds one wire message (MongoDB's maxMessageSizeBytes).
const maxWireMessage = 48_000_000

// relay serves the MongoDB protocol on its listeners and forwards each
// connection to the engine's private socket.
type relay struct {
	engine string // the engine's private socket
	gate   *writeGate

	mu     sync.Mutex
	lns    []net.Listener
	conns  map[net.Conn]struct{}
	closed chan struct{}
	wg     sync.WaitGroup
}

func newRelay(engine string) *relay {
	return &relay{engine: engine, gate: newWriteGate(), conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
}

// serve accepts connections on l until Close.
func (r *relay) serve(l net.Listener) {
	r.mu.Lock()
	r.lns = append(r.lns, l)
	r.mu.Unlock()
	r.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.wg.Go(func() { r.handle(c) })
		}
	})
}

// Close stops accepting, closes every connection and waits for the pumps.
func (r *relay) Close() {
	r.mu.Lock()
	select {
	case <-r.closed:
	default:
		close(r.closed)
	}
	for _, l := range r.lns {
		_ = l.Close()
	}
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.closed:
		return false
	default:
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.conns, c)
	}
}

// relayConn is one client connection and its engine connection. The driver
// sends one command and reads its reply before the next on a connection,
// so at most one write of a connection holds the slot.
type relayConn struct {
	gate     *writeGate
	mu       sync.Mutex
	held     bool
	since    time.Time
	released chan struct{} // closed when the held slot is given back
}

func (rc *relayConn) hold() {
	rc.mu.Lock()
	rc.held, rc.since, rc.released = true, time.Now(), make(chan struct{})
	rc.mu.Unlock()
}

func (rc *relayConn) release() {
	rc.mu.Lock()
	held, since, ch := rc.held, rc.since, rc.released
	rc.held = false
	rc.mu.Unlock()
	if held {
		rc.gate.held.Add(int64(time.Since(since)))
		rc.gate.release()
		close(ch)
	}
}

// pending is closed when no write of this connection holds the slot.
func (rc *relayConn) pending() <-chan struct{} {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.held {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return rc.released
}

func (r *relay) handle(client net.Conn) {
	engine, err := net.Dial("unix", r.engine)
	if err != nil {
		_ = client.Close()
		return
	}
	if !r.track(client, engine) {
		_ = client.Close()
		_ = engine.Close()
		return
	}
	defer r.untrack(client, engine)
	rc := &relayConn{gate: r.gate}

	// Engine to client: a reply gives the slot back (the command has run),
	// then goes to the client, who may be gone: the reply is then dropped.
	replies := make(chan struct{})
	go func() {
		defer close(replies)
		defer rc.release()
		defer client.Close()
		for {
			msg, err := readWireMessage(engine)
			if err != nil {
				return
			}
			rc.release()
			_, _ = client.Write(msg)
		}
	}()

	// Client to engine: a write command waits for the slot.
	for {
		msg, err := readWireMessage(client)
		if err != nil {
			break
		}
		if relayedWrite(msg) {
			if err := r.gate.acquire(time.Time{}, r.closed); err != nil {
				break
			}
			rc.hold()
		}
		if _, err := engine.Write(msg); err != nil {
			rc.release()
			break
		}
	}
	// The client is gone (or the relay closes). A write still running keeps
	// the slot until the engine's reply: closing the engine connection now
	// could let the next write run beside it.
	select {
	case <-rc.pending():
	case <-r.closed:
	}
	_ = engine.Close()
	<-replies
}

// readWireMessage reads one whole wire message (header included).
func readWireMessage(c net.Conn) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(h[:]))
	if n < 16 || n > maxWireMessage {
		return nil, fmt.Errorf("wire message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, h[:])
	if _, err := io.ReadFull(c, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// relayedWrite reports whether a client's message must run alone: every
// OP_MSG command that is not a known read (isWriteCommand), and any opcode
// but the legacy OP_QUERY of a handshake. An OP_MSG with moreToCome set has
// no reply to wait for, so it is passed through (msgapi never sends one).
func relayedWrite(msg []byte) bool {
	_, _, _, op, rem, ok := wiremessage.ReadHeader(msg)
	switch {
	case !ok:
		return true
	//lint:ignore SA1019 the relay must recognise a client's legacy OP_QUERY handshake; it never sends one
	case op == wiremessage.OpQuery:
		return false
	case op != wiremessage.OpMsg:
		return true
	}
	flags, _, ok := wiremessage.ReadMsgFlags(rem)
	if ok && flags&wiremessage.MoreToCome != 0 {
		return false
	}
	return isWriteCommand(msg)
}
