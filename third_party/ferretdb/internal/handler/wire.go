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

import (
	"context"
	"sync/atomic"

	"github.com/FerretDB/wire"

	"github.com/FerretDB/FerretDB/internal/bson"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// init sets wire package to return error if float64 NaN value is present in wire messages.
func init() {
	wire.CheckNaNs = true
}

// opMsgDocument gets a raw document from section 0 and converts to [*types.Document].
// Then it iterates raw documents from sections 1 if any, appends them
// to the response using the section identifier as the key.
//
// msgapi (PATCHES.md, patch 13): the connection has converted section 0
// already, to read its comment; the first call for msg takes that
// conversion from ctx (WithSection0) instead of doing it again.
func opMsgDocument(ctx context.Context, msg *wire.OpMsg) (*types.Document, error) {
	var err error
	res := takeSection0(ctx, msg)
	if res == nil {
		if res, err = bson.ToDocument(msg.RawSection0()); err != nil {
			return nil, lazyerrors.Error(err)
		}
	}

	for _, section := range msg.Sections() {
		if section.Kind == 0 {
			continue
		}

		docs := section.Documents()
		a := types.MakeArray(len(docs))

		for _, d := range docs {
			var doc *types.Document

			if doc, err = bson.ToDocument(d); err != nil {
				return nil, lazyerrors.Error(err)
			}

			a.Append(doc)
		}

		res.Set(section.Identifier, a)
	}

	return res, nil
}

// documentOpMsg converts the document to [*wirebson.Document].
func documentOpMsg(doc *types.Document) (*wire.OpMsg, error) {
	return wire.NewOpMsg(must.NotFail(bson.FromDocument(doc)))
}

// section0 is msg's section 0 as the connection converted it, for the
// handler's first opMsgDocument to take (msgapi, patch 13).
type section0 struct {
	msg   *wire.OpMsg
	doc   *types.Document
	taken atomic.Bool
}

type section0Key struct{}

// WithSection0 returns ctx carrying doc, msg's section 0 as [bson.ToDocument]
// converted it, so that the handler of msg does not convert it again. The
// caller must not use doc afterwards: the handler owns it (and may change
// it, as it does its own conversion).
func WithSection0(ctx context.Context, msg *wire.OpMsg, doc *types.Document) context.Context {
	return context.WithValue(ctx, section0Key{}, &section0{msg: msg, doc: doc})
}

// takeSection0 returns the conversion WithSection0 left in ctx for msg,
// once; nil when there is none, it is another message's, or it was taken.
func takeSection0(ctx context.Context, msg *wire.OpMsg) *types.Document {
	s, _ := ctx.Value(section0Key{}).(*section0)
	if s == nil || s.msg != msg || !s.taken.CompareAndSwap(false, true) {
		return nil
	}
	return s.doc
}
