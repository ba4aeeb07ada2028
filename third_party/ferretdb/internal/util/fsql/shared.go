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

// msgapi (third_party/ferretdb/PATCHES.md, patches 6 and 8): one
// transaction shared by several backend calls, so that the writes of one
// msgapiWrite command into several collections of one database commit
// together, with one commit (and one fsync of the write-ahead log) instead
// of one per collection. Queries under its context, once it has begun,
// read through it, so that they see what it wrote (patch 8).

import (
	"context"
	"errors"

	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
)

// sharedTxKey is the context key of a *SharedTx.
type sharedTxKey struct{}

// SharedTx is a transaction that every InTransaction call under its context
// joins instead of running its own: the first call begins it, the owner
// commits or rolls it back. Not safe for concurrent use.
type SharedTx struct {
	db     *DB
	tx     *Tx
	failed bool
}

// WithSharedTx returns a context under which InTransaction calls share one
// transaction, and that transaction. The caller must call Commit or
// Rollback, and must not create collections (or change any other metadata)
// under the returned context.
func WithSharedTx(ctx context.Context) (context.Context, *SharedTx) {
	s := new(SharedTx)
	return context.WithValue(ctx, sharedTxKey{}, s), s
}

// join runs f in ctx's shared transaction, beginning it on db if needed.
// ok is false when ctx has none.
func (db *DB) join(ctx context.Context, f func(*Tx) error) (ok bool, err error) {
	s, _ := ctx.Value(sharedTxKey{}).(*SharedTx)
	if s == nil {
		return false, nil
	}

	switch {
	case s.failed:
		return true, lazyerrors.New("shared transaction failed earlier")
	case s.tx == nil:
		sqlTx, err := db.sqlDB.BeginTx(ctx, nil)
		if err != nil {
			s.failed = true
			return true, lazyerrors.Error(err)
		}

		s.db, s.tx = db, wrapTx(sqlTx, db.l, db.stmts)
	case s.db != db:
		return true, lazyerrors.New("shared transaction spans two databases")
	}

	if err = f(s.tx); err != nil {
		s.failed = true
	}

	return true, err
}

// sharedQuery runs query in ctx's shared transaction when one has begun on
// db; ok is false otherwise (then nothing this command wrote is pending, and
// a read of any connection sees what the transaction would).
func (db *DB) sharedQuery(ctx context.Context, query string, args ...any) (rows *Rows, ok bool, err error) {
	s, _ := ctx.Value(sharedTxKey{}).(*SharedTx)
	if s == nil || s.tx == nil || s.db != db {
		return nil, false, nil
	}

	rows, err = s.tx.QueryContext(ctx, query, args...)
	if err != nil {
		s.failed = true
	}

	return rows, true, err
}

// Commit commits the shared transaction; nothing to do when no call began
// it. It fails, and rolls back, when any call under it failed.
func (s *SharedTx) Commit() error {
	if s.tx == nil {
		return nil
	}

	tx := s.tx
	s.tx = nil

	if s.failed {
		_ = tx.Rollback()
		return lazyerrors.Error(errors.New("shared transaction not committed: a call under it failed"))
	}

	if err := tx.Commit(); err != nil {
		return lazyerrors.Error(err)
	}

	return nil
}

// Rollback rolls the shared transaction back, if it was begun and is still
// open.
func (s *SharedTx) Rollback() {
	if s.tx == nil {
		return
	}

	_ = s.tx.Rollback()
	s.tx = nil
}
