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

// msgapi (third_party/ferretdb/PATCHES.md, patch 15): the statements the
// backend runs again and again (a read by _id, an insert of n documents, a
// delete of n _ids, each per table) are prepared once per connection and
// kept, instead of parsed and planned by SQLite at every call. A one-shot
// db.QueryContext(query) prepares, runs and finalizes its statement; a
// *sql.Stmt keeps one prepared statement per pooled connection (database/sql
// prepares it on a connection the first time it runs there), and the driver
// resets it between runs.
//
// The rules that keep a kept statement from being used twice at once:
//   - database/sql gives a connection to one caller at a time, and keeps it
//     with the Rows of a query until they are closed: outside a transaction
//     a statement cannot be reused while its rows are open;
//   - inside a transaction every call runs on the transaction's one
//     connection, so a query whose text has rows still open in the same
//     transaction is prepared afresh (Tx.queryOpen), never run on the kept
//     statement that those rows are reading;
//   - an Exec steps its statement to the end and resets it before it returns.
//
// The set is bounded (maxStatements texts, least recently used out first);
// a statement is closed once it is out of the set and no call holds it, and
// database/sql finalizes it on each connection once the rows and
// transactions that use it are done.

import (
	"container/list"
	"context"
	"database/sql"
	"strings"
	"sync"
)

// maxStatements bounds the texts kept: the backend's statements differ by
// table, by kind and by the number of documents or _ids in them.
const maxStatements = 256

// stmtCache is a bounded set of prepared statements by their text.
type stmtCache struct {
	mu    sync.Mutex
	db    *sql.DB
	max   int
	byKey map[string]*list.Element // of *cachedStmt
	lru   list.List                // front: most recently used
}

// cachedStmt is one kept statement; refs counts the calls using it.
type cachedStmt struct {
	query   string
	stmt    *sql.Stmt
	refs    int
	evicted bool
}

func newStmtCache(db *sql.DB, max int) *stmtCache {
	return &stmtCache{db: db, max: max, byKey: map[string]*list.Element{}}
}

// cacheable reports whether query is a data statement worth keeping: not
// DDL, PRAGMA or a transaction statement, which run once or change the
// schema.
func cacheable(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n")
	if len(q) < 6 {
		return false
	}

	switch strings.ToUpper(q[:6]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE":
		return !strings.Contains(q, ";")
	default:
		return false
	}
}

// acquire returns the kept statement for query, preparing it if needed, for
// the caller to release once its call has returned. It returns nil (run the
// query unprepared) for a query not worth keeping, or when preparing fails:
// the unprepared call then reports the same error.
func (c *stmtCache) acquire(ctx context.Context, query string) *cachedStmt {
	if c == nil || !cacheable(query) {
		return nil
	}

	c.mu.Lock()
	if el, ok := c.byKey[query]; ok {
		c.lru.MoveToFront(el)
		cs := el.Value.(*cachedStmt)
		cs.refs++
		c.mu.Unlock()

		return cs
	}
	c.mu.Unlock()

	// Prepared outside the lock: preparing waits for a connection.
	stmt, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if el, ok := c.byKey[query]; ok { // another caller kept it meanwhile
		_ = stmt.Close()
		c.lru.MoveToFront(el)
		cs := el.Value.(*cachedStmt)
		cs.refs++

		return cs
	}

	cs := &cachedStmt{query: query, stmt: stmt, refs: 1}
	c.byKey[query] = c.lru.PushFront(cs)

	for c.lru.Len() > c.max {
		old := c.lru.Back()
		ocs := old.Value.(*cachedStmt)
		c.lru.Remove(old)
		delete(c.byKey, ocs.query)
		ocs.evicted = true

		if ocs.refs == 0 {
			_ = ocs.stmt.Close()
		}
	}

	return cs
}

// release ends a call's use of cs.
func (c *stmtCache) release(cs *cachedStmt) {
	c.mu.Lock()
	defer c.mu.Unlock()

	cs.refs--
	if cs.refs == 0 && cs.evicted {
		_ = cs.stmt.Close()
	}
}

// close closes every kept statement; the cache keeps none after it.
func (c *stmtCache) close() {
	if c == nil {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	for el := c.lru.Front(); el != nil; el = el.Next() {
		cs := el.Value.(*cachedStmt)
		cs.evicted = true

		if cs.refs == 0 {
			_ = cs.stmt.Close()
		}
	}

	c.byKey = map[string]*list.Element{}
	c.lru.Init()
}

// len returns how many statements are kept.
func (c *stmtCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()

	return c.lru.Len()
}
