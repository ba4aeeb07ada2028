// Copyright 2021 FerretDB Inc.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package fsql

// msgapi (PATCHES.md, patch 15): the kept statements' own rules, on a real
// SQLite file. msgapi's store tests cover them through the engine
// (store/statements_test.go); these reach what the engine's handlers do not
// show from outside: two open queries of one text in one transaction, and a
// statement pushed out of the set while a call holds it.

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	_ "modernc.org/sqlite"
)

func openTestDB(t *testing.T, keep int) *DB {
	t.Helper()

	sqlDB, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "t.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}

	db := WrapDB(sqlDB, "test", slog.Default())
	if keep > 0 {
		db.stmts = newStmtCache(sqlDB, keep)
	}

	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})

	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}

	for i := 1; i <= 5; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO t (id, v) VALUES (?, ?)`, i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
	}

	return db
}

func scanAll(t *testing.T, rows *Rows) []string {
	t.Helper()

	var out []string

	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}

		out = append(out, v)
	}

	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	return out
}

// Two queries of one text open at once in one transaction (one
// connection): the second must not run on the statement the first one's
// rows are reading.
func TestKeptStatementNestedInTx(t *testing.T) {
	db := openTestDB(t, 16)
	ctx := context.Background()
	q := `SELECT v FROM t WHERE id >= ? ORDER BY id`

	err := db.InTransaction(ctx, func(tx *Tx) error {
		outer, err := tx.QueryContext(ctx, q, 1)
		if err != nil {
			return err
		}

		var got []string

		for outer.Next() {
			var v string
			if err := outer.Scan(&v); err != nil {
				return err
			}

			got = append(got, v)

			inner, err := tx.QueryContext(ctx, q, 4)
			if err != nil {
				return err
			}

			if in := scanAll(t, inner); len(in) != 2 || in[0] != "v4" || in[1] != "v5" {
				t.Errorf("inner query: %v, want [v4 v5]", in)
			}

			_ = inner.Close()
		}

		if err := outer.Err(); err != nil {
			return err
		}

		_ = outer.Close()

		if len(got) != 5 || got[0] != "v1" || got[4] != "v5" {
			t.Errorf("outer query: %v, want v1 … v5", got)
		}

		// Closed: the text runs on its kept statement again.
		again, err := tx.QueryContext(ctx, q, 5)
		if err != nil {
			return err
		}

		if a := scanAll(t, again); len(a) != 1 || a[0] != "v5" {
			t.Errorf("query after close: %v, want [v5]", a)
		}

		return again.Close()
	})
	if err != nil {
		t.Fatal(err)
	}

	if n := db.stmts.len(); n != 2 { // the set-up's insert and the query
		t.Errorf("%d statements kept, want 2", n)
	}
}

// A set of two statements, used by many goroutines with more texts than
// it holds: every call answers its own query, none finds its statement
// closed under it.
func TestKeptStatementsPushedOut(t *testing.T) {
	db := openTestDB(t, 2)
	ctx := context.Background()

	var wg sync.WaitGroup

	errs := make(chan error, 64)

	for g := range 8 {
		wg.Add(1)

		go func() {
			defer wg.Done()

			for i := range 200 {
				id := 1 + (g+i)%5
				// One text per (id's residue mod 7): more texts than kept.
				q := fmt.Sprintf(`SELECT v FROM t WHERE id = ? AND %d = %d`, i%7, i%7)

				rows, err := db.QueryContext(ctx, q, id)
				if err != nil {
					errs <- err
					return
				}

				var got []string

				for rows.Next() {
					var v string
					if err := rows.Scan(&v); err != nil {
						errs <- err
						return
					}

					got = append(got, v)
				}

				if err := rows.Err(); err != nil {
					errs <- err
					return
				}

				_ = rows.Close()

				if want := fmt.Sprint("v", id); len(got) != 1 || got[0] != want {
					errs <- fmt.Errorf("%q with %d: %v, want [%s]", q, id, got, want)
					return
				}

				if _, err := db.ExecContext(ctx, fmt.Sprintf(`UPDATE t SET v = v WHERE id = ? AND %d = %d`, i%5, i%5), id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}

	wg.Wait()
	close(errs)

	for err := range errs {
		t.Error(err)
	}

	if n := db.stmts.len(); n != 2 {
		t.Errorf("%d statements kept, want 2", n)
	}
}

// What is not a data statement is never kept.
func TestCacheable(t *testing.T) {
	for q, want := range map[string]bool{
		`SELECT v FROM t`:                  true,
		"\n  insert INTO t VALUES (?)":     true,
		`UPDATE t SET v = ?`:               true,
		`DELETE FROM t WHERE id IN (?, ?)`: true,
		`CREATE TABLE x (a)`:               false,
		`DROP TABLE t`:                     false,
		`PRAGMA busy_timeout`:              false,
		`SELECT 1; DROP TABLE t`:           false,
		`BEGIN`:                            false,
		``:                                 false,
	} {
		if got := cacheable(q); got != want {
			t.Errorf("cacheable(%q) = %v, want %v", q, got, want)
		}
	}
}
