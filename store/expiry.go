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
// the expired documents' _ids, and the pass costs what it deletes, not
// what the collection holds. The documents' own reads and every write still
// go through the engine. A process attached by URI only scans as before.
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
		if err != nil || table == "" {
			return err
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

// expiredSQL selects, through the expiry index, the _id and its BSON type
// of up to ? documents whose expiry field is a date at or before ? ms: what
// {field: {$lte: <date>}} matches (a value of another type is never
// compared with a date).
func expiredSQL(table, field string) string {
	return fmt.Sprintf(`SELECT _ferretdb_sjson->>'$._id', _ferretdb_sjson->>'$."$s".p._id.t' FROM %q
		WHERE %s <= ? AND _ferretdb_sjson->>'$."$s".p.%s.t' = 'date' LIMIT ?`, table, expiryExpr(field), field)
}

// expiredIDs returns the _ids of up to limit documents of c expired at
// ms, read from the engine's database file.
func (s *Store) expiredIDs(ctx context.Context, c Collection, ms int64, limit int) ([]any, error) {
	db, err := openSQLite(s.sqlite)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	table, err := tableOf(ctx, db, c.Name)
	if err != nil || table == "" {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, expiredSQL(table, c.ExpiresField), ms, limit)
	if err != nil {
		return nil, fmt.Errorf("scan %s for expired documents: %w", c.Name, err)
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id, typ string
		if err := rows.Scan(&id, &typ); err != nil {
			return nil, err
		}
		switch typ {
		case "string":
			ids = append(ids, id)
		case "objectId":
			oid, err := bson.ObjectIDFromHex(id)
			if err != nil {
				return nil, fmt.Errorf("expired document of %s: _id %q: %w", c.Name, id, err)
			}
			ids = append(ids, oid)
		default:
			// msgapi writes string _ids only (and the driver ObjectIDs); a
			// document with another _id type is left for a person to look at.
			s.log.Warn().Str("collection", c.Name).Str("idType", typ).Msg("expired document with an unexpected _id type left in place")
		}
	}
	return ids, rows.Err()
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
	return queryPlan(ctx, db, expiredSQL(table, c.ExpiresField), 0, 1)
}
