package store

// The embedded engine (FerretDB v1.24.2, SQLite backend) stores each
// collection as a table with one JSON column, _ferretdb_sjson, and a unique
// index on the expression  _ferretdb_sjson->"_id" . Upstream's queries
// filtered on  _ferretdb_sjson->'$._id' , the same value, which SQLite's
// planner does not match to that index (it matches indexed expressions as
// written): every lookup by _id scanned the whole table (4 ms at 1,000
// documents, 45 ms at 20,000). msgapi used to add a second index on the
// queries' expression (name suffix _msgapi_id). Its build of the engine now
// queries with the unique index's expression (third_party/ferretdb/
// PATCHES.md, patch 7), so that second index only costs every insert,
// update and delete an index entry more: start-up drops it where an
// earlier version created it.

import (
	"context"
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", the one FerretDB uses
)

const (
	ferretMetadataTable = "_ferretdb_collections"
	ferretIDExpr        = `_ferretdb_sjson->'_id'` // the engine's, patch 7
)

// dropExtraIDIndexes drops the _id expression index earlier versions of
// msgapi added to the table behind every collection of the SQLite database
// file (see above).
func dropExtraIDIndexes(ctx context.Context, file string) error {
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
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`DROP INDEX IF EXISTS %q`, t+"_msgapi_id")); err != nil {
			return fmt.Errorf("drop the extra _id index of %s: %w", t, err)
		}
	}
	return nil
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
