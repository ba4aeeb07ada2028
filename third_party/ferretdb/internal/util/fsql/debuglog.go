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
	"time"

	"github.com/FerretDB/FerretDB/internal/util/logging"
)

// msgapi (PATCHES.md, patch 9): FerretDB logged every SQL statement at debug
// level and built the log entry first, whether debug logging was on or not:
// an slog.Logger.With, which a JSON handler formats at once (the arguments
// are the statement's documents, marshalled to JSON), and a fmt.Sprintf. Under
// load that was about 4 % of msgapi's CPU for entries nobody wrote. Every
// statement now asks debugOn first, and these two build the same entries as
// before when it is on.

// debugOn reports whether l writes debug entries.
func debugOn(ctx context.Context, l *slog.Logger) bool {
	return l.Enabled(ctx, slog.LevelDebug)
}

// logStart logs a statement about to run.
func logStart(ctx context.Context, l *slog.Logger, query string, args []any) {
	l.With(slog.Any("args", args)).DebugContext(ctx, ">>> "+query)
}

// logEnd logs a statement that ran (res: nil for queries).
func logEnd(ctx context.Context, l *slog.Logger, query string, args []any, start time.Time, res sql.Result, err error) {
	fields := []any{slog.Any("args", args)}

	if res != nil {
		ra, _ := res.RowsAffected()
		fields = append(fields, slog.Int64("rows", ra))
	}

	fields = append(fields, slog.Duration("time", time.Since(start)), logging.Error(err))
	l.With(fields...).DebugContext(ctx, "<<< "+query)
}
