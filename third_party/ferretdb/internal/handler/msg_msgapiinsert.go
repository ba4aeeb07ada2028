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

package handler

// msgapi (third_party/ferretdb/PATCHES.md, patch 6): msgapiInsert, an
// unordered insert into several collections of one database in one SQLite
// transaction. msgapi's group commit (store/batch.go) sends the inserts
// that concurrent requests make, into whichever collections, as one such
// command: one commit instead of one per collection.

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/FerretDB/wire"
	"go.mongodb.org/mongo-driver/mongo"

	"github.com/FerretDB/FerretDB/internal/backends"
	"github.com/FerretDB/FerretDB/internal/handler/common"
	"github.com/FerretDB/FerretDB/internal/handler/handlererrors"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/fsql"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// MsgMsgapiInsert implements the msgapiInsert command:
//
//	{msgapiInsert: 1, $db: <db>, inserts: [{collection: <name>, documents: [<doc>, ...]}, ...]}
//
// Every document is inserted or reported, as an unordered insert would:
// the answer is {n: <inserted>, writeErrors: [{index, code, errmsg}], ok: 1},
// where index counts the documents of all inserts in order. The documents
// that are inserted commit together, in one transaction. Collections that do
// not exist are created first, outside it.
func (h *Handler) MsgMsgapiInsert(connCtx context.Context, msg *wire.OpMsg) (*wire.OpMsg, error) {
	document, err := opMsgDocument(msg)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	dbName, err := common.GetRequiredParam[string](document, "$db")
	if err != nil {
		return nil, err
	}

	inserts, err := common.GetRequiredParam[*types.Array](document, "inserts")
	if err != nil {
		return nil, err
	}

	db, err := h.b.Database(dbName)
	if err != nil {
		if backends.ErrorCodeIs(err, backends.ErrorCodeDatabaseNameIsInvalid) {
			msg := fmt.Sprintf("Invalid database name: %s", dbName)
			return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiInsert")
		}

		return nil, lazyerrors.Error(err)
	}

	// part is one collection's documents and their indexes in the command.
	type part struct {
		name    string
		c       backends.Collection
		docs    []*types.Document
		indexes []int
	}

	var parts []part
	var writeErrors []*mongo.WriteError
	var index int

	for i := range inserts.Len() {
		entry, ok := must.NotFail(inserts.Get(i)).(*types.Document)
		if !ok {
			return nil, handlererrors.NewCommandErrorMsgWithArgument(
				handlererrors.ErrBadValue, fmt.Sprintf("inserts.%d is not a document", i), "msgapiInsert",
			)
		}

		name, err := common.GetRequiredParam[string](entry, "collection")
		if err != nil {
			return nil, err
		}

		docs, err := common.GetRequiredParam[*types.Array](entry, "documents")
		if err != nil {
			return nil, err
		}

		c, err := db.Collection(name)
		if err != nil {
			if backends.ErrorCodeIs(err, backends.ErrorCodeCollectionNameIsInvalid) {
				msg := fmt.Sprintf("Invalid collection name: %s", name)
				return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiInsert")
			}

			return nil, lazyerrors.Error(err)
		}

		err = db.CreateCollection(connCtx, &backends.CreateCollectionParams{Name: name})
		if err != nil && !backends.ErrorCodeIs(err, backends.ErrorCodeCollectionAlreadyExists) {
			return nil, lazyerrors.Error(err)
		}

		p := part{name: name, c: c}

		for j := range docs.Len() {
			doc, ok := must.NotFail(docs.Get(j)).(*types.Document)
			if !ok {
				return nil, handlererrors.NewCommandErrorMsgWithArgument(
					handlererrors.ErrBadValue, fmt.Sprintf("inserts.%d.documents.%d is not a document", i, j), "msgapiInsert",
				)
			}

			if !doc.Has("_id") {
				doc.Set("_id", types.NewObjectID())
			}

			if err = doc.ValidateData(); err != nil {
				var we *mongo.WriteError
				if we, err = validationWriteError(index, err); err != nil {
					return nil, err
				}

				writeErrors = append(writeErrors, we)
				index++

				continue
			}

			p.docs = append(p.docs, doc)
			p.indexes = append(p.indexes, index)
			index++
		}

		parts = append(parts, p)
	}

	ctx, shared := fsql.WithSharedTx(connCtx)
	defer shared.Rollback()

	var inserted int32

	for _, p := range parts {
		if len(p.docs) == 0 {
			continue
		}

		res, err := p.c.InsertAll(ctx, &backends.InsertAllParams{Docs: p.docs, SkipDuplicates: true})
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		inserted += int32(len(p.docs) - len(res.Duplicates))

		for _, j := range res.Duplicates {
			writeErrors = append(writeErrors, duplicateKeyError(p.indexes[j], dbName, p.name))
		}
	}

	if err = shared.Commit(); err != nil {
		return nil, lazyerrors.Error(err)
	}

	res := must.NotFail(types.NewDocument("n", inserted))

	if len(writeErrors) > 0 {
		slices.SortFunc(writeErrors, func(a, b *mongo.WriteError) int { return cmp.Compare(a.Index, b.Index) })

		array := types.MakeArray(len(writeErrors))
		for _, we := range writeErrors {
			array.Append(WriteErrorDocument(we))
		}

		res.Set("writeErrors", array)
	}

	res.Set("ok", float64(1))

	return documentOpMsg(res)
}
