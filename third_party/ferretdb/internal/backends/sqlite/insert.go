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

// encodeBuffers are the buffers documents are encoded into (marshalString);
// one larger than maxEncodeBuffer is not kept.
var encodeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxEncodeBuffer = 1 << 20

// marshalString is sjson.Marshal's encoding of doc as the string SQLite
// binds (msgapi, PATCHES.md, patch 16): encoded into a reused buffer and
// copied out once, for an insert and an update alike.
func marshalString(doc *types.Document) (string, error) {
	bp := encodeBuffers.Get().(*[]byte)
	defer encodeBuffers.Put(bp)

	b, err := sjson.AppendMarshal((*bp)[:0], doc)
	if err != nil {
		return "", err
	}

	if cap(b) <= maxEncodeBuffer {
		*bp = b
	}

	return string(b), nil
}

// prepareInsertStatement returns a statement and arguments for inserting the given documents.
//
// If capped is true, it returns a statement and arguments for inserting record IDs and documents.
func prepareInsertStatement(tableName string, capped bool, docs []*types.Document) (string, []any, error) {
	var args []any
	rows := make([]string, len(docs))

	for i, doc := range docs {
		b, err := marshalString(doc)
		if err != nil {
			return "", nil, lazyerrors.Error(err)
		}

		if capped {
			rows[i] = "(?, ?)"
			args = append(args, doc.RecordID(), b)

			continue
		}

		rows[i] = "(?)"
		args = append(args, b)
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
