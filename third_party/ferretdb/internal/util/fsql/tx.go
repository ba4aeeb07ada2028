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

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/internal/util/resource"
)

// Tx wraps [*database/sql.Tx] with resource tracking.
//
// It exposes the subset of *sql.Tx methods we use.
type Tx struct {
	sqlTx *sql.Tx
	l     *slog.Logger
	token *resource.Token

	// msgapi (PATCHES.md, patch 15): the database's kept statements, and
	// how many Rows of each text are open in this transaction.
	stmts  *stmtCache
	openMu sync.Mutex
	open   map[string]int
}

// wrapTx creates new Tx.
func wrapTx(tx *sql.Tx, l *slog.Logger, stmts *stmtCache) *Tx {
	if tx == nil {
		return nil
	}

	res := &Tx{
		sqlTx: tx,
		l:     l,
		token: resource.NewToken(),
		stmts: stmts,
	}

	resource.Track(res, res.token)

	return res
}

// Commit calls [*sql.Tx.Commit].
func (tx *Tx) Commit() error {
	resource.Untrack(tx, tx.token)
	return tx.sqlTx.Commit()
}

// Rollback calls [*sql.Tx.Rollback].
func (tx *Tx) Rollback() error {
	resource.Untrack(tx, tx.token)
	return tx.sqlTx.Rollback()
}

// QueryContext calls [*sql.Tx.QueryContext].
func (tx *Tx) QueryContext(ctx context.Context, query string, args ...any) (*Rows, error) {
	start := time.Now()

	debug := debugOn(ctx, tx.l)
	if debug {
		logStart(ctx, tx.l, query, args)
	}

	var rows *sql.Rows
	var err error

	cs := tx.acquire(ctx, query)
	if cs != nil {
		rows, err = tx.sqlTx.StmtContext(ctx, cs.stmt).QueryContext(ctx, args...)
		tx.stmts.release(cs)
	} else {
		rows, err = tx.sqlTx.QueryContext(ctx, query, args...)
	}

	if debug {
		logEnd(ctx, tx.l, query, args, start, nil, err)
	}

	res := wrapRows(rows)
	if res != nil && cs != nil {
		// Until these rows are closed, the kept statement is theirs: a
		// query of the same text in this transaction is prepared afresh.
		tx.setOpen(query, +1)
		res.onClose = func() { tx.setOpen(query, -1) }
	}

	return res, err
}

// QueryRowContext calls [*sql.Tx.QueryRowContext].
func (tx *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	start := time.Now()

	debug := debugOn(ctx, tx.l)
	if debug {
		logStart(ctx, tx.l, query, args)
	}

	row := tx.sqlTx.QueryRowContext(ctx, query, args...)

	if debug {
		logEnd(ctx, tx.l, query, args, start, nil, row.Err())
	}

	return row
}

// ExecContext calls [*sql.Tx.ExecContext].
func (tx *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	start := time.Now()

	debug := debugOn(ctx, tx.l)
	if debug {
		logStart(ctx, tx.l, query, args)
	}

	var res sql.Result
	var err error

	if cs := tx.acquire(ctx, query); cs != nil {
		res, err = tx.sqlTx.StmtContext(ctx, cs.stmt).ExecContext(ctx, args...)
		tx.stmts.release(cs)
	} else {
		res, err = tx.sqlTx.ExecContext(ctx, query, args...)
	}

	if debug {
		logEnd(ctx, tx.l, query, args, start, res, err)
	}

	return res, err
}

// acquire returns the database's kept statement for query, or nil when
// there is none to use: none are kept, or rows of that text are still open
// in this transaction (msgapi, PATCHES.md, patch 15).
func (tx *Tx) acquire(ctx context.Context, query string) *cachedStmt {
	if tx.stmts == nil {
		return nil
	}

	tx.openMu.Lock()
	busy := tx.open[query] > 0
	tx.openMu.Unlock()

	if busy {
		return nil
	}

	return tx.stmts.acquire(ctx, query)
}

// setOpen counts the open Rows of query's kept statement in tx.
func (tx *Tx) setOpen(query string, d int) {
	tx.openMu.Lock()
	defer tx.openMu.Unlock()

	if tx.open == nil {
		tx.open = map[string]int{}
	}

	tx.open[query] += d
	if tx.open[query] <= 0 {
		delete(tx.open, query)
	}
}
