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
	// EmbeddedAddr is the loopback address the embedded engine listens on,
	// so that a second msgapi process or mongosh can share it.
	EmbeddedAddr string
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
	// URI is the connection string in use, credentials redacted.
	URI string
	// ReplicaSet is true when the deployment is a replica set; lock writes
	// then use write concern majority so a lock survives a failover.
	ReplicaSet bool
	// RoundTrips counts commands sent to the store.
	RoundTrips *Counter

	embedded *Embedded
	sqlite   string // the embedded engine's database file, when we can reach it
	log      zerolog.Logger

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
		e, err := StartEmbedded(ctx, opts.DataDir, opts.EmbeddedAddr, opts.Log)
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
	client, err := mongo.Connect(copts)
	if err != nil {
		s.closeEmbedded()
		return nil, fmt.Errorf("connect to %s: %w", s.URI, err)
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
	return s, nil
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

// Redact removes the password from a connection string, for logs.
func Redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "mongodb://(unparseable URI)"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	return u.String()
}

// IsDuplicateKey reports whether err is a unique-index violation: the
// answer "somebody else's insert won".
func IsDuplicateKey(err error) bool { return mongo.IsDuplicateKeyError(err) }

// IsNotFound reports whether err means "no document".
func IsNotFound(err error) bool { return errors.Is(err, mongo.ErrNoDocuments) }
