// Package store connects msgapi to MongoDB, or starts the embedded
// MongoDB-compatible engine when no MONGODB_URI is given, and owns everything
// that depends on which of the two is running: index creation, the expiry
// reaper used where TTL indexes are missing, and the round-trip counter.
//
// Every hot-path read and write in msgapi is a single-document operation by a
// string _id derived by hashing, because that is the one shape that is both
// atomic and indexed on MongoDB and on the embedded engine (see idindex.go).
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Options configure Open.
type Options struct {
	// URI of a MongoDB deployment. Empty starts the embedded engine.
	URI string
	// Database name; default "msgapi".
	Database string
	// DataDir holds the embedded engine's SQLite files.
	DataDir string
	// EmbeddedAddr, when set, is a loopback TCP address the embedded
	// engine also listens on (opt-in; the Unix socket is always served).
	EmbeddedAddr string
	// EmbeddedSocket overrides the embedded engine's socket path (default
	// DataDir/mongodb.sock).
	EmbeddedSocket string
	// SQLiteDir, with URI set, names the data folder of an embedded engine
	// that URI points at, so that Ensure can add its missing _id indexes
	// (tests share one engine between many stores).
	SQLiteDir string
	// ConnectTimeout bounds start-up: an unreachable store fails Open
	// within it instead of hanging.
	ConnectTimeout time.Duration
	// OpTimeout is the deadline of every store call whose context has none
	// (the driver's operation timeout), so that a stalled store cannot hold
	// a request forever. Zero: none.
	OpTimeout time.Duration
	Log       zerolog.Logger
}

// Store is a connected MongoDB database.
type Store struct {
	Client *mongo.Client
	DB     *mongo.Database
	// URI is the connection string in use reduced to what may be logged:
	// scheme, hosts, database and replica set (Redact).
	URI string
	// ReplicaSet is true when the deployment is a replica set; lock writes
	// then use write concern majority so a lock survives a failover.
	ReplicaSet bool
	// RoundTrips counts commands sent to the store.
	RoundTrips *Counter

	embedded *Embedded
	ferret   bool // the store is FerretDB (see OneWriter)
	// gate passes write commands one at a time, in arrival order
	// (writegate.go); nil on MongoDB.
	gate   *writeGate
	sqlite string // the embedded engine's database file, when we can reach it
	log    zerolog.Logger

	batchMu sync.Mutex
	batches map[string]*Batch // group-commit inserters by collection (batch.go)
	group   *batchQueue       // the embedded engine's one queue for every collection (batch.go)

	reapMu  sync.Mutex
	reaped  []Collection // collections without a TTL index, and owned ones
	reapers map[string]ReapFunc
}

// Open connects to opts.URI, or starts the embedded engine first when it is
// empty, and checks that the store answers within opts.ConnectTimeout.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Database == "" {
		opts.Database = "msgapi"
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	s := &Store{RoundTrips: NewCounter(), log: opts.Log}

	uri := opts.URI
	if uri == "" {
		e, err := StartEmbedded(ctx, EmbeddedOptions{Dir: opts.DataDir, Socket: opts.EmbeddedSocket, TCP: opts.EmbeddedAddr, Log: opts.Log})
		if err != nil {
			return nil, err
		}
		s.embedded = e
		s.sqlite = e.DatabaseFile(opts.Database)
		uri = e.URI()
	}
	if opts.SQLiteDir != "" {
		s.sqlite = filepath.Join(opts.SQLiteDir, opts.Database+".sqlite")
	}
	s.URI = Redact(uri)

	copts := options.Client().
		ApplyURI(uri).
		SetServerSelectionTimeout(opts.ConnectTimeout).
		SetConnectTimeout(opts.ConnectTimeout).
		SetMonitor(s.RoundTrips.Monitor())
	if opts.OpTimeout > 0 {
		copts.SetTimeout(opts.OpTimeout)
	}
	if s.sqlite != "" {
		// The embedded engine (ours, or one a test shares): writes queue
		// first come, first served in this process (writegate.go).
		s.gate = newWriteGate()
		copts.SetDialer(&gatedDialer{gate: s.gate})
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		// The driver's parse errors quote pieces of the URI (a bad escape
		// in a password, an option value), so only the redacted form shows.
		s.closeEmbedded()
		return nil, fmt.Errorf("connect to %s: the connection string is invalid, or its mongodb+srv DNS records could not be read (the driver's detail is withheld: it may quote credentials)", s.URI)
	}
	s.Client = client
	s.DB = client.Database(opts.Database)

	pingCtx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	var hello struct {
		SetName string `bson:"setName"`
	}
	if err := s.DB.RunCommand(pingCtx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		_ = s.Close(context.Background())
		return nil, fmt.Errorf("the store at %s did not answer within %s: %w", s.URI, opts.ConnectTimeout, err)
	}
	s.ReplicaSet = hello.SetName != ""
	s.DB = client.Database(opts.Database, dbOptions(s.ReplicaSet))
	// FerretDB names itself in buildInfo (ferretdbVersion); a second process attached to the
	// embedded engine through MONGODB_URI learns it here too.
	var info bson.M
	if err := s.DB.RunCommand(pingCtx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err == nil {
		if s.ferret, err = engineCheck(info); err != nil {
			_ = s.Close(context.Background())
			return nil, fmt.Errorf("the store at %s: %w", s.URI, err)
		}
	}
	s.ferret = s.ferret || s.embedded != nil || s.sqlite != ""
	return s, nil
}

// engineCheck reads a buildInfo reply: ferret is true for FerretDB, and
// err is set for a FerretDB that is not msgapi's embedded engine.
func engineCheck(info bson.M) (ferret bool, err error) {
	v, ferret := info["ferretdbVersion"]
	if s, _ := v.(string); ferret && s != EngineVersion && strings.HasPrefix(s, "v1.24.2+msgapi") {
		return true, fmt.Errorf("it is msgapi's embedded engine from another msgapi version (%s; this one needs %s, "+
			"whose commands it uses): run the same msgapi version as the engine's host", s, EngineVersion)
	}
	if ferret && v != EngineVersion {
		return true, fmt.Errorf("it is FerretDB %v, not msgapi's embedded engine (%s): "+
			"its conditional writes are not atomic between processes, and the duplicate guard and the "+
			"Idempotency-Key layer rely on them; use MongoDB (a replica set), or attach to a msgapi "+
			"server's embedded store through its socket (README: Stores)", v, EngineVersion)
	}
	return ferret, nil
}

// EngineVersion is what msgapi's embedded engine reports as its
// ferretdbVersion (third_party/ferretdb/PATCHES.md): its patch level. Only
// that FerretDB runs every write command alone (relay.go), pushes a
// filter's _id conjunct down, which conditional writes need, and has the
// msgapiWrite command (batch.go); Open refuses any other.
const EngineVersion = "v1.24.2+msgapi.17"

// OneWriter reports whether the store is the embedded engine (FerretDB on
// SQLite), where the write commands of every process run one at a time
// (relay.go): there a write that only loses — an insert of an _id that
// exists — still holds the writer that requests queue for, and a read
// that spares it is worth its round trip.
func (s *Store) OneWriter() bool { return s.ferret }

// SerialWrites reports whether this process queues its write commands to
// the store one at a time, first come, first served: on the embedded
// engine, whose SQLite admits one writer anyway (writegate.go).
func (s *Store) SerialWrites() bool { return s.gate != nil }

// WriterStats is what queueing the writes has cost (see SerialWrites);
// zero on MongoDB.
func (s *Store) WriterStats() WriterStats {
	if s.gate == nil {
		return WriterStats{}
	}
	return s.gate.stats()
}

// dbOptions: on a replica set every write waits for a majority and every
// read goes to the primary, for every collection, so that nothing a request
// was told (a lock, a claim, a message, its outcome) is rolled back by a
// failover or read stale from a secondary. Elsewhere the driver's defaults.
func dbOptions(replicaSet bool) *options.DatabaseOptionsBuilder {
	o := options.Database()
	if replicaSet {
		o.SetWriteConcern(writeconcern.Majority()).SetReadPreference(readpref.Primary())
	}
	return o
}

// Embedded reports whether this process runs the embedded engine.
func (s *Store) Embedded() bool { return s.embedded != nil }

// Engine is the embedded engine this process runs, nil when none.
func (s *Store) Engine() *Embedded { return s.embedded }

// Ping checks that the store answers (readiness).
func (s *Store) Ping(ctx context.Context) error {
	return s.DB.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}).Err()
}

// Close disconnects and stops the embedded engine, if any.
func (s *Store) Close(ctx context.Context) error {
	var err error
	if s.Client != nil {
		err = s.Client.Disconnect(ctx)
	}
	s.closeEmbedded()
	return err
}

func (s *Store) closeEmbedded() {
	if s.embedded != nil {
		s.embedded.Stop()
	}
}

// Collection returns the named collection of the database.
func (s *Store) Collection(name string) *mongo.Collection { return s.DB.Collection(name) }

// Redact reduces a connection string to what may be logged: the scheme,
// the hosts, the database and the replicaSet option. User names, passwords
// and every other option (authMechanismProperties can carry an AWS session
// token, tlsCertificateKeyFilePassword a key's password) are dropped. A
// string it cannot read with certainty yields no part of it at all.
func Redact(uri string) string {
	const unreadable = "mongodb://(unreadable connection string)"
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || (scheme != "mongodb" && scheme != "mongodb+srv") {
		return unreadable
	}
	authority, path, hasPath := strings.Cut(rest, "/")
	query := ""
	if hasPath {
		path, query, _ = strings.Cut(path, "?")
	}
	// The driver takes everything before the first @ as user info and
	// refuses a second @ or a / in it, so an @ anywhere outside the
	// authority, or a ? inside it, means the string is not what it seems.
	if strings.ContainsAny(authority, "?#") || strings.Contains(path, "@") || strings.Count(authority, "@") > 1 {
		return unreadable
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	hosts := strings.Split(authority, ",")
	for _, h := range hosts {
		if !hostPattern.MatchString(h) {
			return unreadable
		}
	}
	out := scheme + "://" + strings.Join(hosts, ",") + "/"
	if path != "" {
		if !namePattern.MatchString(path) {
			return unreadable
		}
		out += path
	}
	if q, err := url.ParseQuery(query); err == nil {
		for k, vs := range q {
			if strings.EqualFold(k, "replicaSet") && len(vs) == 1 && namePattern.MatchString(vs[0]) {
				out += "?replicaSet=" + vs[0]
			}
		}
	}
	return out
}

var (
	// hostPattern: a name or IP with an optional port, a bracketed IPv6
	// address, or an escaped socket path (%2Ftmp%2Fmongodb.sock).
	hostPattern = regexp.MustCompile(`^([A-Za-z0-9._%-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)
	namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// IsDuplicateKey reports whether err is a unique-index violation: the
// answer "somebody else's insert won".
func IsDuplicateKey(err error) bool { return mongo.IsDuplicateKeyError(err) }

// IsNotFound reports whether err means "no document".
func IsNotFound(err error) bool { return errors.Is(err, mongo.ErrNoDocuments) }

// ByID is the filter {_id: id}: the one lookup that is indexed and atomic
// on MongoDB and the embedded engine alike (on the embedded engine, the
// only filter pushed down to SQL).
func ByID(id string) bson.D { return bson.D{{Key: "_id", Value: id}} }

// FindIDs reads the documents of c whose _id is in ids into *docs (a
// pointer to a slice), IDsPerRead to a command: on MongoDB by the _id
// index, and on the embedded engine as well (third_party/ferretdb/
// PATCHES.md, patch 5: it pushes _id $in down to SQL up to 1,000 ids).
// Ids that hold no document are simply absent.
func FindIDs[T any](ctx context.Context, c *mongo.Collection, ids []string, docs *[]T, opts ...options.Lister[options.FindOptions]) error {
	for chunk := range slices.Chunk(ids, IDsPerRead) {
		cur, err := c.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: chunk}}}}, opts...)
		if err != nil {
			return err
		}
		if err := All(ctx, cur, docs); err != nil {
			return err
		}
	}
	return nil
}

// All appends every document of cur, decoded, to *docs and closes cur:
// cur.All, but with bson.Unmarshal, since the driver's Cursor.All makes a
// 4 KB read buffer for every document it decodes (the dispatcher reads its
// pending events this way, hundreds a pass).
func All[T any](ctx context.Context, cur *mongo.Cursor, docs *[]T) error {
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		var d T
		if err := bson.Unmarshal(cur.Current, &d); err != nil {
			return err
		}
		*docs = append(*docs, d)
	}
	return cur.Err()
}

// IDsPerRead bounds the ids of one FindIDs command.
const IDsPerRead = 500
