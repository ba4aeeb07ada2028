package store

// The reaper's scan on the embedded engine. FerretDB pushes no filter but
// {_id} down to SQL (idindex.go), so the reaper's find of
// {expiresAt: {$lte: now}} read every document of the collection and
// converted each from JSON, expired or not: about 80 µs a document
// (BenchmarkReapPass), 8 s a pass at 100,000 live documents, every
// interval, for each collection. The event log and the receipts keep 30
// days, so that scan grew with history until the reaper never rested.
//
// Where this process can reach the engine's database file (the engine's
// host, and tests), the reaper asks SQLite itself instead: an expression
// index on the expiry field (created by Ensure, beside the _id one) finds
// the expired documents, and the pass costs what it deletes, not what the
// collection holds. It reads only what the reapers use: the _id, the
// expiry, and an owned collection's ReapFields (strings: the lock's
// holder, the key record's generation). Every write still goes through the
// engine. A process attached by URI only scans as before.
//
// The layout read here is FerretDB v1.24.2's (the last v1, frozen): one
// table per collection, named in _ferretdb_collections, with the document
// as JSON in _ferretdb_sjson and its BSON types in the "$s" schema beside
// the values. A date is a JSON number of milliseconds since the epoch.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// plainField is a field name that can go into a SQLite JSON path as is.
var plainField = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// expiryExpr is the SQL value of the expiry field: an INTEGER for a date.
func expiryExpr(field string) string { return fmt.Sprintf(`(_ferretdb_sjson->>'$.%s')`, field) }

// patchExpiryIndexes adds the expiry expression index to the table of each
// reaped collection of the SQLite database file.
func patchExpiryIndexes(ctx context.Context, file string, colls []Collection) error {
	db, err := openSQLite(file)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, c := range colls {
		if c.ExpiresField == "" {
			continue
		}
		if !plainField.MatchString(c.ExpiresField) {
			return fmt.Errorf("expiry field %q of %s is not a plain name", c.ExpiresField, c.Name)
		}
		table, err := tableOf(ctx, db, c.Name)
		if err != nil {
			return err
		}
		if table == "" {
			continue // no table yet: Ensure runs again at the next start-up
		}
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, table+"_msgapi_exp", table, expiryExpr(c.ExpiresField))
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create expiry expression index on %s: %w", c.Name, err)
		}
	}
	return nil
}

// tableOf returns the table behind collection coll, "" when it has none.
func tableOf(ctx context.Context, db *sql.DB, coll string) (string, error) {
	var table string
	err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT table_name FROM %q WHERE name = ?`, ferretMetadataTable), coll).Scan(&table)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find table of %s: %w", coll, err)
	}
	return table, nil
}

// expiredSQL selects, through the expiry index, up to ? documents whose
// expiry field is a date at or before ? ms — what {field: {$lte: <date>}}
// matches (a value of another type is never compared with a date) — as
// their _id with its BSON type, their expiry, and each of fields with its
// BSON type.
func expiredSQL(table, field string, fields []string) string {
	cols := `_ferretdb_sjson->>'$._id', _ferretdb_sjson->>'$."$s".p._id.t', ` + expiryExpr(field)
	for _, f := range fields {
		cols += fmt.Sprintf(`, _ferretdb_sjson->>'$.%s', _ferretdb_sjson->>'$."$s".p.%s.t'`, f, f)
	}
	return fmt.Sprintf(`SELECT %s FROM %q WHERE %s <= ? AND _ferretdb_sjson->>'$."$s".p.%s.t' = 'date' LIMIT ?`,
		cols, table, expiryExpr(field), field)
}

// expiredFromFile reads up to limit documents of c expired at now from the
// engine's database file: each as {_id, <expiry>, <ReapFields that are
// strings>}. One statement, so what it returns was expired in one
// snapshot, as the engine's own scan would have returned it.
func (s *Store) expiredFromFile(ctx context.Context, c Collection, now time.Time, limit int) ([]bson.Raw, error) {
	for _, f := range c.ReapFields {
		if !plainField.MatchString(f) {
			return nil, fmt.Errorf("reap field %q of %s is not a plain name", f, c.Name)
		}
	}
	db, err := openSQLite(s.sqlite)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	table, err := tableOf(ctx, db, c.Name)
	if err != nil || table == "" {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, expiredSQL(table, c.ExpiresField, c.ReapFields), now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("scan %s for expired documents: %w", c.Name, err)
	}
	defer rows.Close()
	var docs []bson.Raw
	for rows.Next() {
		var id, idType string
		var expiry int64
		vals := make([]sql.NullString, 2*len(c.ReapFields))
		dest := []any{&id, &idType, &expiry}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		doc := bson.D{{Key: "_id", Value: id}}
		switch idType {
		case "string":
		case "objectId":
			oid, err := bson.ObjectIDFromHex(id)
			if err != nil {
				return nil, fmt.Errorf("expired document of %s: _id %q: %w", c.Name, id, err)
			}
			doc[0].Value = oid
		default:
			// msgapi writes string _ids only (and the driver ObjectIDs); a
			// document with another _id type is left for a person to look at.
			s.log.Warn().Str("collection", c.Name).Str("idType", idType).Msg("expired document with an unexpected _id type left in place")
			continue
		}
		doc = append(doc, bson.E{Key: c.ExpiresField, Value: bson.DateTime(expiry)})
		for i, f := range c.ReapFields {
			if v, t := vals[2*i], vals[2*i+1]; v.Valid && t.String == "string" {
				doc = append(doc, bson.E{Key: f, Value: v.String})
			}
		}
		raw, err := bson.Marshal(doc)
		if err != nil {
			return nil, err
		}
		docs = append(docs, raw)
	}
	return docs, rows.Err()
}

// expiredPlan returns SQLite's query plan for the reaper's scan of c.
func expiredPlan(ctx context.Context, file string, c Collection) (string, error) {
	db, err := openSQLite(file)
	if err != nil {
		return "", err
	}
	defer db.Close()
	table, err := tableOf(ctx, db, c.Name)
	if err != nil {
		return "", err
	}
	return queryPlan(ctx, db, expiredSQL(table, c.ExpiresField, c.ReapFields), 0, 1)
}
