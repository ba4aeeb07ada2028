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
	"sync"

	"github.com/FerretDB/FerretDB/internal/backends/sqlite/metadata"
	"github.com/FerretDB/FerretDB/internal/handler/sjson"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
)

// encodeBuffers are the buffers prepareInsertStatement encodes documents
// into; one larger than maxEncodeBuffer is not kept.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxEncodeBuffer = 1 << 20

// prepareInsertStatement returns a statement and arguments for inserting the given documents.
//
// If capped is true, it returns a statement and arguments for inserting record IDs and documents.
func prepareInsertStatement(tableName string, capped bool, docs []*types.Document) (string, []any, error) {
	var args []any
	rows := make([]string, len(docs))

	// msgapi (PATCHES.md, patch 16): each document is encoded into one
	// reused buffer, and copied out once, into the string SQLite binds.
	bp := encodeBuffers.Get().(*[]byte)
	defer encodeBuffers.Put(bp)

	for i, doc := range docs {
		b, err := sjson.AppendMarshal((*bp)[:0], doc)
		if err != nil {
			return "", nil, lazyerrors.Error(err)
		}

		if cap(b) <= maxEncodeBuffer {
			*bp = b
		}

		if capped {
			rows[i] = "(?, ?)"
			args = append(args, doc.RecordID(), string(b))

			continue
		}

		rows[i] = "(?)"
		args = append(args, string(b))
	}

	columns := metadata.DefaultColumn
	if capped {
		columns = strings.Join([]string{metadata.RecordIDColumn, metadata.DefaultColumn}, ", ")
	}

	return fmt.Sprintf(
		`INSERT INTO %q (%s) VALUES %s`,
		tableName,
		columns,
		strings.Join(rows, ", "),
	), args, nil
}
