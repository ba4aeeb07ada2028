package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// AddOldIDIndex creates on coll's table the _id index earlier versions of
// msgapi added (idindex.go).
func AddOldIDIndex(ctx context.Context, s *Store, coll string) error {
	return withTable(ctx, s, coll, func(db *sql.DB, table string) error {
		_, err := db.ExecContext(ctx, fmt.Sprintf(`CREATE INDEX %q ON %q (_ferretdb_sjson->'$._id')`, table+"_msgapi_id", table))
		return err
	})
}

// withTable runs f on the SQLite file of s's embedded engine, with the
// table behind coll.
func withTable(ctx context.Context, s *Store, coll string, f func(db *sql.DB, table string) error) error {
	db, err := openSQLite(s.sqlite)
	if err != nil {
		return err
	}
	defer db.Close()
	table, err := tableOf(ctx, db, coll)
	if err != nil {
		return err
	}
	return f(db, table)
}

// IndexesNamed counts the SQLite indexes of coll's table whose name ends
// with suffix.
func IndexesNamed(ctx context.Context, s *Store, coll, suffix string) (n int, err error) {
	err = withTable(ctx, s, coll, func(db *sql.DB, table string) error {
		return db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND name = ?`, table, table+suffix).Scan(&n)
	})
	return n, err
}

// DBOptions exposes dbOptions to the tests.
var DBOptions = dbOptions

// HoldWriteGate takes s's write slot as a write command would, and returns
// its release: until then every write of s queues.
func HoldWriteGate(s *Store) (release func()) {
	if err := s.gate.acquire(time.Time{}, nil); err != nil {
		panic(err)
	}
	return s.gate.release
}

// Gate exposes the write gate's queue to the tests.
type Gate = writeGate

// NewGate returns a write gate of its own.
var NewGate = newWriteGate

// Acquire waits for g's slot until deadline (none when zero).
func (g *Gate) Acquire(deadline time.Time) error { return g.acquire(deadline, nil) }

// Release gives g's slot back.
func (g *Gate) Release() { g.release() }

// ExpiredPlan exposes the reaper's expiry scan plan to the tests.
func ExpiredPlan(ctx context.Context, s *Store, c Collection) (string, error) {
	return expiredPlan(ctx, s.sqlite, c)
}

// EngineCheck exposes engineCheck to the tests.
var EngineCheck = engineCheck

// GetEachFinds is Prefetch's read as on MongoDB (one find per document,
// side by side), whatever the store: on the embedded engine it runs the
// MongoDB branch against the same data as the msgapiGet branch.
func GetEachFinds(ctx context.Context, s *Store, docs []Doc) ([]bson.Raw, error) {
	return s.getEachFinds(ctx, docs)
}

// RewriteStored replaces the stored JSON of the document of coll whose _id
// is the string id, behind the engine's back (an embedded engine's data
// folder only): what a damaged row would hold.
func RewriteStored(ctx context.Context, s *Store, coll, id, sjson string) error {
	return withTable(ctx, s, coll, func(db *sql.DB, table string) error {
		res, err := db.ExecContext(ctx, fmt.Sprintf(`UPDATE %q SET _ferretdb_sjson = ? WHERE _ferretdb_sjson->>'$._id' = ?`, table), sjson, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("rewrite %s/%s: %d rows (%v)", coll, id, n, err)
		}
		return nil
	})
}
