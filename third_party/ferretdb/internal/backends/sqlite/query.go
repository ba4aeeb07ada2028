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

package sqlite

import (
	"fmt"
	"strings"

	"github.com/FerretDB/FerretDB/internal/backends/sqlite/metadata"
	"github.com/FerretDB/FerretDB/internal/handler/sjson"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// prepareIDWhereClause returns the WHERE clause, and its arguments, that
// applies the _id conjunct of filter: filter's top-level _id when it is a
// string or an ObjectID, or {$in: [...]} of up to maxIDsPushedDown of them
// and nothing else, whatever other conditions sit beside it (top-level
// conditions are all ANDed, and _id is never an array, so every document the
// filter matches has exactly that _id, or one of those). The rest of the
// filter is left to the handler, which filters every document the query
// returns (the backends.Collection.Query contract: "Filter may be ignored,
// or safely applied partially or entirely"). Without an _id of those shapes
// it returns "", nil: no pushdown.
//
// msgapi patch: upstream v1.24.2 pushed _id down only when it was the
// filter's only key and a string or an ObjectID, so a conditional write such
// as {_id, generation} or a read of a few documents by {_id: {$in}} read the
// whole collection (PATCHES.md, patches 1 and 5).
func prepareIDWhereClause(filter *types.Document) (string, []any) {
	if filter == nil {
		return "", nil
	}
	v, err := filter.Get("_id")
	if err != nil {
		return "", nil
	}
	if isIDScalar(v) {
		return fmt.Sprintf(` WHERE %s = ?`, metadata.IDColumn), []any{string(must.NotFail(sjson.MarshalSingleValue(v)))}
	}

	op, ok := v.(*types.Document)
	if !ok || op.Len() != 1 {
		return "", nil
	}
	in, err := op.Get("$in")
	if err != nil {
		return "", nil
	}
	arr, ok := in.(*types.Array)
	if !ok || arr.Len() == 0 || arr.Len() > maxIDsPushedDown {
		return "", nil
	}
	args := make([]any, arr.Len())
	for i := range arr.Len() {
		e := must.NotFail(arr.Get(i))
		if !isIDScalar(e) {
			return "", nil
		}
		args[i] = string(must.NotFail(sjson.MarshalSingleValue(e)))
	}
	return fmt.Sprintf(` WHERE %s IN (?%s)`, metadata.IDColumn, strings.Repeat(", ?", len(args)-1)), args
}

// maxIDsPushedDown bounds the _ids of one pushed-down $in, well below
// SQLite's limit on a statement's parameters (32,766).
const maxIDsPushedDown = 1000

// isIDScalar reports whether v is an _id value that prepareIDWhereClause
// compares in SQL: a string or an ObjectID.
func isIDScalar(v any) bool {
	switch v.(type) {
	case string, types.ObjectID:
		return true
	default:
		return false
	}
}

// prepareSelectClause returns SELECT clause for default column of provided table name.
//
// For capped collection with onlyRecordIDs, it returns select clause for recordID column.
//
// For capped collection, it returns select clause for recordID column and default column.
func prepareSelectClause(table, comment string, capped, onlyRecordIDs bool) string {
	if comment != "" {
		comment = strings.ReplaceAll(comment, "/*", "/ *")
		comment = strings.ReplaceAll(comment, "*/", "* /")
		comment = `/* ` + comment + ` */`
	}

	if capped && onlyRecordIDs {
		return fmt.Sprintf(`SELECT %s %s FROM %q`, comment, metadata.RecordIDColumn, table)
	}

	if capped {
		return fmt.Sprintf(`SELECT %s %s, %s FROM %q`, comment, metadata.RecordIDColumn, metadata.DefaultColumn, table)
	}

	return fmt.Sprintf(`SELECT %s %s FROM %q`, comment, metadata.DefaultColumn, table)
}

// prepareOrderByClause returns ORDER BY clause for given sort document.
//
// The provided sort document should be already validated.
// Provided document should only contain a single value.
func prepareOrderByClause(sort *types.Document) string {
	if sort.Len() != 1 {
		return ""
	}

	v := must.NotFail(sort.Get("$natural"))
	var order string

	switch v.(int64) {
	case 1:
		// Ascending order
	case -1:
		order = " DESC"
	default:
		panic("not reachable")
	}

	return fmt.Sprintf(" ORDER BY %s%s", metadata.RecordIDColumn, order)
}
