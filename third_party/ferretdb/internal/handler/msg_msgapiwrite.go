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

// msgapi (third_party/ferretdb/PATCHES.md, patches 6 and 8): msgapiWrite,
// the unordered inserts and conditional replaces of several collections of
// one database in one SQLite transaction. msgapi's group commit
// (store/batch.go) sends the writes that concurrent requests make, into
// whichever collections, as one such command: one commit instead of one
// per collection and per replace.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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

// MsgMsgapiWrite implements the msgapiWrite command:
//
//	{msgapiWrite: 1, $db: <db>,
//	 inserts:  [{collection: <name>, documents: [<doc>, ...]}, ...],
//	 replaces: [{collection: <name>, filter: <filter with _id>, replacement: <doc>}, ...]}
//
// Both lists are optional. Every document is inserted or reported, as an
// unordered insert would. Then each replace, in order, replaces the one
// document its filter matches, as a replaceOne without upsert would; its
// filter must name an _id (so it is one indexed lookup, never a scan), and
// it sees the inserts and earlier replaces of the same command. The answer
// is {n: <inserted>, matched: [<0 or 1 per replace>], writeErrors: [{index,
// code, errmsg}], ok: 1}, where index counts the documents of all inserts
// in order and then the replaces. Everything that is written commits
// together, in one transaction; a command runs alone among write commands
// (msgapi's relay), so each replace's condition and write are one atomic
// step. Collections that do not exist are created first, outside it.
func (h *Handler) MsgMsgapiWrite(connCtx context.Context, msg *wire.OpMsg) (*wire.OpMsg, error) {
	document, err := opMsgDocument(connCtx, msg)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	dbName, err := common.GetRequiredParam[string](document, "$db")
	if err != nil {
		return nil, err
	}

	inserts, err := common.GetOptionalParam(document, "inserts", types.MakeArray(0))
	if err != nil {
		return nil, err
	}

	replaces, err := common.GetOptionalParam(document, "replaces", types.MakeArray(0))
	if err != nil {
		return nil, err
	}

	db, err := h.b.Database(dbName)
	if err != nil {
		if backends.ErrorCodeIs(err, backends.ErrorCodeDatabaseNameIsInvalid) {
			msg := fmt.Sprintf("Invalid database name: %s", dbName)
			return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiWrite")
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
				handlererrors.ErrBadValue, fmt.Sprintf("inserts.%d is not a document", i), "msgapiWrite",
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
				return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiWrite")
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
					handlererrors.ErrBadValue, fmt.Sprintf("inserts.%d.documents.%d is not a document", i, j), "msgapiWrite",
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

	// replace is one conditional replace and its index in the command.
	type replace struct {
		name        string
		c           backends.Collection
		filter      *types.Document
		replacement *types.Document
		index       int
	}

	var reps []replace
	matched := make([]int32, replaces.Len())

	for i := range replaces.Len() {
		entry, ok := must.NotFail(replaces.Get(i)).(*types.Document)
		if !ok {
			return nil, handlererrors.NewCommandErrorMsgWithArgument(
				handlererrors.ErrBadValue, fmt.Sprintf("replaces.%d is not a document", i), "msgapiWrite",
			)
		}

		name, err := common.GetRequiredParam[string](entry, "collection")
		if err != nil {
			return nil, err
		}

		filter, err := common.GetRequiredParam[*types.Document](entry, "filter")
		if err != nil {
			return nil, err
		}

		replacement, err := common.GetRequiredParam[*types.Document](entry, "replacement")
		if err != nil {
			return nil, err
		}

		id, _ := filter.Get("_id")
		switch id.(type) {
		case string, types.ObjectID:
		default:
			return nil, handlererrors.NewCommandErrorMsgWithArgument(
				handlererrors.ErrBadValue, fmt.Sprintf("replaces.%d.filter must have a string or ObjectId _id", i), "msgapiWrite",
			)
		}

		for _, k := range replacement.Keys() {
			if strings.HasPrefix(k, "$") {
				return nil, handlererrors.NewCommandErrorMsgWithArgument(
					handlererrors.ErrBadValue, fmt.Sprintf("replaces.%d.replacement must not contain update operators", i), "msgapiWrite",
				)
			}
		}

		c, err := db.Collection(name)
		if err != nil {
			if backends.ErrorCodeIs(err, backends.ErrorCodeCollectionNameIsInvalid) {
				msg := fmt.Sprintf("Invalid collection name: %s", name)
				return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiWrite")
			}

			return nil, lazyerrors.Error(err)
		}

		err = db.CreateCollection(connCtx, &backends.CreateCollectionParams{Name: name})
		if err != nil && !backends.ErrorCodeIs(err, backends.ErrorCodeCollectionAlreadyExists) {
			return nil, lazyerrors.Error(err)
		}

		// The document keeps its _id; a replacement that names another
		// one is refused, as MongoDB refuses it.
		if rid, err := replacement.Get("_id"); err == nil && types.Compare(rid, id) != types.Equal {
			writeErrors = append(writeErrors, &mongo.WriteError{
				Index:   index,
				Code:    int(handlererrors.ErrImmutableField),
				Message: "Performing an update on the path '_id' would modify the immutable field '_id'",
			})
			index++

			continue
		}

		replacement.Set("_id", id)

		if err = replacement.ValidateData(); err != nil {
			var we *mongo.WriteError
			if we, err = validationWriteError(index, err); err != nil {
				return nil, err
			}

			writeErrors = append(writeErrors, we)
			index++

			continue
		}

		reps = append(reps, replace{name: name, c: c, filter: filter, replacement: replacement, index: i})
		index++
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

	for _, r := range reps {
		ok, err := replaceOne(ctx, r.c, r.filter, r.replacement)
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		if ok {
			matched[r.index] = 1
		}
	}

	if err = shared.Commit(); err != nil {
		return nil, lazyerrors.Error(err)
	}

	res := must.NotFail(types.NewDocument("n", inserted))

	if replaces.Len() > 0 {
		m := types.MakeArray(len(matched))
		for _, v := range matched {
			m.Append(v)
		}

		res.Set("matched", m)
	}

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

// replaceOne replaces the document that filter matches, if any, with
// replacement (which carries its _id), under ctx's shared transaction:
// the lookup reads through it (fsql, patch 8), so it sees what the
// command wrote before it. The filter's _id conjunct is pushed down
// (patch 1), and the whole filter decides, as in every handler.
func replaceOne(ctx context.Context, c backends.Collection, filter, replacement *types.Document) (bool, error) {
	cur, err := getByID(ctx, c, filter)
	if err != nil {
		return false, lazyerrors.Error(err)
	}

	if cur == nil {
		return false, nil
	}

	if types.Compare(cur, replacement) == types.Equal {
		return true, nil
	}

	if _, err = c.UpdateAll(ctx, &backends.UpdateAllParams{Docs: []*types.Document{replacement}}); err != nil {
		return false, lazyerrors.Error(err)
	}

	return true, nil
}
