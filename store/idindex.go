package store

// The embedded engine (FerretDB v1.24.2, SQLite backend) stores each
// collection as a table with one JSON column, _ferretdb_sjson. Its own _id
// index is built on the expression  _ferretdb_sjson->"_id"  but its queries
// filter on  _ferretdb_sjson->'$._id' , which SQLite does not treat as the
// same expression: every lookup by _id scans the whole table (measured 4 ms at
// 1k documents, 45 ms at 20k). An index on the expression the queries use
// makes them 0.6–1.1 ms, flat from 1k to 20k documents.
//
// FerretDB pushes a filter down to SQL only when it is exactly {_id: <string
// or ObjectID>}; that is why every hot-path operation in msgapi filters on
// _id alone.
//
// v1.24.2 is the last v1 release, so this storage layout is frozen. The index
// is ours (name suffix _msgapi_id), is created with IF NOT EXISTS, and goes
// away with its table when FerretDB drops a collection.

import (
	"context"
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", the one FerretDB uses
)

const (
	ferretMetadataTable = "_ferretdb_collections"
	ferretIDExpr        = `_ferretdb_sjson->'$._id'`
)

// patchIDIndexes adds the missing _id expression index to the table behind
// every collection of the SQLite database file.
func patchIDIndexes(ctx context.Context, file string) error {
	db, err := openSQLite(file)
	if err != nil {
		return err
	}
	defer db.Close()

	tables, err := ferretTables(ctx, db)
	if err != nil {
		return err
	}
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, t+"_msgapi_id", t, ferretIDExpr)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create _id expression index on %s: %w", t, err)
		}
	}
	return nil
}

// idLookupPlan returns SQLite's query plan for the statement FerretDB runs
// for a find by _id on collection coll, so a test can prove the index is used.
func idLookupPlan(ctx context.Context, file, coll string) (string, error) {
	db, err := openSQLite(file)
	if err != nil {
		return "", err
	}
	defer db.Close()

	table, err := tableOf(ctx, db, coll)
	if err != nil {
		return "", err
	}
	return queryPlan(ctx, db, fmt.Sprintf(`SELECT _ferretdb_sjson FROM %q WHERE %s = ?`, table, ferretIDExpr), `"x"`)
}

// queryPlan returns SQLite's plan for statement q, one step a line.
func queryPlan(ctx context.Context, db *sql.DB, q string, args ...any) (string, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan += detail + "\n"
	}
	return plan, rows.Err()
}

func openSQLite(file string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

func ferretTables(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT table_name FROM %q`, ferretMetadataTable))
	if err != nil {
		return nil, fmt.Errorf("list embedded engine tables: %w", err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		tables = append(tables, t)
	}
	return tables, rows.Err()
}
