package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// get is one GET /api/messages/{id}; kind "read" when it answers 200 with
// that message.
func (l *load) get(ctx context.Context, id string) answer {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.t.url+"/api/messages/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+l.t.key)
	start := time.Now()
	res, err := l.client.Do(req)
	if err != nil {
		return answer{took: time.Since(start), kind: "error", err: err}
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	a := answer{took: time.Since(start), status: res.StatusCode, body: body, kind: "error", err: err}
	if err != nil || res.StatusCode != http.StatusOK {
		return a
	}
	var v struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
	}
	if a.err = json.Unmarshal(body, &v); a.err == nil && v.Message.ID == id {
		a.kind, a.messageID = "read", id
	}
	return a
}

// gets reads ids with n clients, each taking the next id when its last
// read is answered.
func (l *load) gets(ctx context.Context, ids []string, n int) ([]answer, time.Duration) {
	return inParallel(ctx, ids, n, l.get)
}

func (l *load) expectRead(ids []string, answers []answer) {
	for i, a := range answers {
		if a.kind != "read" {
			l.fail("read: %s: want 200 with the message, got %s", ids[i], describe(a))
		}
	}
}

// quiesce waits until the server's event dispatcher has moved every event
// the run recorded out of outbox_pending (at most -timeout): a phase that
// measures one request's own cost, or the store's raw rate, should not
// share the writer with a backlog earlier phases left. It returns how many
// events were pending and how long they took to drain.
//
// It counts the backlog once and then only asks whether any is left (a find
// of one document, which costs the engine one row): a count every poll
// would read every pending document each time and take the CPU the
// dispatcher needs (an earlier version did, and slowed the drain it
// measured).
func (s *rawStore) quiesce(ctx context.Context) (pending int64, took time.Duration, err error) {
	start := time.Now()
	coll := s.db.Collection("outbox_pending")
	if pending, err = coll.EstimatedDocumentCount(ctx); err != nil {
		return 0, 0, fmt.Errorf("count pending events: %w", err)
	}
	for {
		err := coll.FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		switch {
		case errors.Is(err, mongo.ErrNoDocuments):
			return pending, time.Since(start), nil
		case err != nil:
			return pending, time.Since(start), fmt.Errorf("read pending events: %w", err)
		}
		select {
		case <-ctx.Done():
			return pending, time.Since(start), errors.New("events still pending at -timeout")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
