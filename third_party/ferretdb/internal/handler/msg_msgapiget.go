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

// msgapi (third_party/ferretdb/PATCHES.md, patch 12): msgapiGet, reads of
// single documents by _id from several collections in one command. A send
// reads three documents whose _ids it knows before it reads any (the
// recipient's suppression, the dedup lock, the lead); each find of its own
// paid a round trip and the engine's whole per-command work.

import (
	"context"
	"fmt"

	"github.com/FerretDB/wire"

	"github.com/FerretDB/FerretDB/internal/backends"
	"github.com/FerretDB/FerretDB/internal/handler/common"
	"github.com/FerretDB/FerretDB/internal/handler/handlererrors"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/iterator"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// msgapiGetMax is the most documents one msgapiGet reads.
const msgapiGetMax = 16

// MsgMsgapiGet implements the msgapiGet command:
//
//	{msgapiGet: 1, $db: <db>, gets: [{collection: <name>, id: <string or ObjectId>}, ...]}
//
// It answers {documents: [<the document, or null when there is none>, ...], ok: 1},
// one entry per get, in order: what a find of {_id: <id>} with limit 1 in
// that collection would return (a missing collection holds no documents).
// Each lookup is one indexed read (the _id is pushed down, patch 1), and
// each is its own read, as separate finds are: the command is not a
// snapshot of the documents together. At most 16 gets.
func (h *Handler) MsgMsgapiGet(connCtx context.Context, msg *wire.OpMsg) (*wire.OpMsg, error) {
	document, err := opMsgDocument(connCtx, msg)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	dbName, err := common.GetRequiredParam[string](document, "$db")
	if err != nil {
		return nil, err
	}

	gets, err := common.GetRequiredParam[*types.Array](document, "gets")
	if err != nil {
		return nil, err
	}

	if gets.Len() > msgapiGetMax {
		return nil, handlererrors.NewCommandErrorMsgWithArgument(
			handlererrors.ErrBadValue, fmt.Sprintf("gets has %d entries, at most %d are allowed", gets.Len(), msgapiGetMax), "msgapiGet",
		)
	}

	db, err := h.b.Database(dbName)
	if err != nil {
		if backends.ErrorCodeIs(err, backends.ErrorCodeDatabaseNameIsInvalid) {
			msg := fmt.Sprintf("Invalid database name: %s", dbName)
			return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiGet")
		}

		return nil, lazyerrors.Error(err)
	}

	type get struct {
		c      backends.Collection
		filter *types.Document
	}

	list := make([]get, gets.Len())

	for i := range gets.Len() {
		entry, ok := must.NotFail(gets.Get(i)).(*types.Document)
		if !ok {
			return nil, handlererrors.NewCommandErrorMsgWithArgument(
				handlererrors.ErrBadValue, fmt.Sprintf("gets.%d is not a document", i), "msgapiGet",
			)
		}

		name, err := common.GetRequiredParam[string](entry, "collection")
		if err != nil {
			return nil, err
		}

		id, _ := entry.Get("id")
		switch id.(type) {
		case string, types.ObjectID:
		default:
			return nil, handlererrors.NewCommandErrorMsgWithArgument(
				handlererrors.ErrBadValue, fmt.Sprintf("gets.%d.id must be a string or an ObjectId", i), "msgapiGet",
			)
		}

		c, err := db.Collection(name)
		if err != nil {
			if backends.ErrorCodeIs(err, backends.ErrorCodeCollectionNameIsInvalid) {
				msg := fmt.Sprintf("Invalid collection name: %s", name)
				return nil, handlererrors.NewCommandErrorMsgWithArgument(handlererrors.ErrInvalidNamespace, msg, "msgapiGet")
			}

			return nil, lazyerrors.Error(err)
		}

		list[i] = get{c: c, filter: must.NotFail(types.NewDocument("_id", id))}
	}

	docs := types.MakeArray(len(list))

	for _, g := range list {
		doc, err := getByID(connCtx, g.c, g.filter)
		if err != nil {
			return nil, lazyerrors.Error(err)
		}

		if doc == nil {
			docs.Append(types.Null)
			continue
		}

		docs.Append(doc)
	}

	return documentOpMsg(must.NotFail(types.NewDocument(
		"documents", docs,
		"ok", float64(1),
	)))
}

// getByID returns the one document of c that filter matches, or nil.
// filter names an _id (msgapiGet's {_id: <id>}, a replace's {_id, ...}),
// which is pushed down (patch 1), and the whole filter decides, as in every
// handler. Under a shared transaction (msgapiWrite) the lookup reads
// through it (patch 8).
func getByID(ctx context.Context, c backends.Collection, filter *types.Document) (*types.Document, error) {
	res, err := c.Query(ctx, &backends.QueryParams{Filter: filter})
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	closer := iterator.NewMultiCloser(res.Iter)
	defer closer.Close()

	iter := common.LimitIterator(common.FilterIterator(res.Iter, closer, filter), closer, 1)

	docs, err := iterator.ConsumeValues(iter)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	if len(docs) == 0 {
		return nil, nil
	}

	return docs[0], nil
}
