package notify

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/store"
)

// The event log of a workspace, for GET /api/events, built for a store
// that indexes only _id equality: entry n of workspace W has _id "W:n",
// n = 1, 2, 3, ... without gaps (a slot is taken by inserting it, and only
// the slot after a taken one is ever tried). Newest first is then a walk
// down from the head by _id, and a page costs its own entries' lookups
// whatever the size of the collection. The head document ("W:head") is a
// hint written after every hintEvery-th append; the true head is found by
// reading forward from it (at most hintEvery-1 reads more).

type logEntry struct {
	ID          string    `bson:"_id"`
	WorkspaceID string    `bson:"workspaceId"`
	Seq         int64     `bson:"seq"`
	EventID     string    `bson:"eventId"`
	Type        string    `bson:"type"`
	CreatedAt   time.Time `bson:"createdAt"`
	Payload     string    `bson:"payload"`
	ExpiresAt   time.Time `bson:"expiresAt"`
}

type logHead struct {
	ID  string `bson:"_id"`
	Seq int64  `bson:"seq"`
}

// hintEvery: the head hint is written at every hintEvery-th slot, not at
// each append, which saves a write per event on the embedded engine's
// single writer for at most hintEvery-1 more reads by a reader or a
// process that starts appending.
const hintEvery = 16

func logID(ws string, n int64) string { return ws + ":" + strconv.FormatInt(n, 10) }
func headID(ws string) string         { return ws + ":head" }

// appendLog puts e into its workspace's log at the first free slot.
func (o *Outbox) appendLog(ctx context.Context, e event) error {
	written, err := o.appendWorkspace(ctx, e.WorkspaceID, []event{e})
	if err == nil && len(written) == 0 {
		err = fmt.Errorf("append event %s to the log: not written", e.ID)
	}
	return err
}

// appendLogs puts each event into its workspace's log at the first free
// slots: one insert command per round for all of them (store.Batch); an
// entry whose slot another writer took is tried again at the next free
// one. It returns the events whose entry is written; the others stay
// pending (the error says why), and this process's next append starts at
// the lowest slot whose insert failed, so a gap is filled, never left.
func (o *Outbox) appendLogs(ctx context.Context, evs []event) (written []event, err error) {
	byWS := map[string][]event{}
	var order []string
	for _, e := range evs {
		if _, ok := byWS[e.WorkspaceID]; !ok {
			order = append(order, e.WorkspaceID)
		}
		byWS[e.WorkspaceID] = append(byWS[e.WorkspaceID], e)
	}
	var errs []error
	for _, ws := range order {
		w, err := o.appendWorkspace(ctx, ws, byWS[ws])
		written = append(written, w...)
		errs = append(errs, err)
	}
	return written, errors.Join(errs...)
}

// maxLogRounds bounds the rounds of one append: each lost round means
// other writers took every slot tried, so only pathological contention
// reaches it.
const maxLogRounds = 10000

// appendWorkspace is appendLogs for one workspace's events.
func (o *Outbox) appendWorkspace(ctx context.Context, ws string, evs []event) (written []event, err error) {
	n, err := o.nextFree(ctx, ws)
	if err != nil {
		return nil, err
	}
	resume := int64(-1) // the lowest slot whose insert failed
	hint := int64(0)
	defer func() {
		if resume < 0 {
			resume = n
		}
		o.seqMu.Lock()
		if len(o.nextSeq) >= 10000 {
			clear(o.nextSeq)
		}
		o.nextSeq[ws] = resume
		o.seqMu.Unlock()
		if hint > 0 {
			_, _ = o.evlog.UpdateOne(ctx, store.ByID(headID(ws)), bson.D{{Key: "$max", Value: bson.D{{Key: "seq", Value: hint}}}}, upsert())
		}
	}()
	pending := evs
	for round := 0; len(pending) > 0; round++ {
		if round >= maxLogRounds {
			return written, fmt.Errorf("append %d events to the log: no free slot after %d rounds", len(pending), round)
		}
		docs := make([]any, len(pending))
		slots := make([]int64, len(pending))
		for i, e := range pending {
			slots[i] = n
			docs[i] = logEntry{ID: logID(ws, n), WorkspaceID: ws, Seq: n, EventID: e.ID,
				Type: e.Type, CreatedAt: e.CreatedAt, Payload: e.Payload, ExpiresAt: e.CreatedAt.Add(Retention)}
			n++
		}
		errs, err := o.logBatch.Insert(ctx, docs...)
		if err != nil {
			resume = slots[0]
			return written, fmt.Errorf("append %d events to the log: %w", len(pending), err)
		}
		var retry []event
		var failed error
		for i, e := range pending {
			switch {
			case errs[i] == nil:
				written = append(written, e)
				if slots[i]%hintEvery == 0 {
					hint = max(hint, slots[i])
				}
			case store.IsDuplicateKey(errs[i]):
				retry = append(retry, e) // another writer took the slot
			default:
				if resume < 0 || slots[i] < resume {
					resume = slots[i]
				}
				failed = errors.Join(failed, fmt.Errorf("append event %s to the log: %w", e.ID, errs[i]))
			}
		}
		if failed != nil {
			return written, failed
		}
		pending = retry
	}
	return written, nil
}

// nextFree is the first slot worth trying: this process's last append + 1,
// else the head hint + 1.
func (o *Outbox) nextFree(ctx context.Context, ws string) (int64, error) {
	o.seqMu.Lock()
	n, ok := o.nextSeq[ws]
	o.seqMu.Unlock()
	if ok {
		return n, nil
	}
	h, err := o.headHint(ctx, ws)
	return h + 1, err
}

func (o *Outbox) headHint(ctx context.Context, ws string) (int64, error) {
	var h logHead
	err := o.evlog.FindOne(ctx, store.ByID(headID(ws))).Decode(&h)
	if err != nil && !store.IsNotFound(err) {
		return 0, msgapi.Unavailable(fmt.Errorf("read event log head: %w", err))
	}
	return h.Seq, nil
}

// head is the newest taken slot of ws's log (0: empty).
func (o *Outbox) head(ctx context.Context, ws string) (int64, error) {
	h, err := o.headHint(ctx, ws)
	if err != nil {
		return 0, err
	}
	for {
		err := o.evlog.FindOne(ctx, store.ByID(logID(ws, h+1))).Err()
		if store.IsNotFound(err) {
			return h, nil
		}
		if err != nil {
			return 0, msgapi.Unavailable(fmt.Errorf("read event log: %w", err))
		}
		h++
	}
}

// ListQuery filters GET /api/events.
type ListQuery struct {
	Type   string
	Since  time.Time // zero: no bound
	Limit  int       // 1..100
	Cursor string    // from the previous page's NextCursor
}

// Page is one page of events, newest first.
type Page struct {
	Events     []EventView
	NextCursor string // "" on the last page
}

// maxScan bounds the entries one page reads when a type filter skips
// most of them; the page then ends early with a cursor to go on.
const maxScan = 1000

// ListEvents returns a page of a workspace's events, newest first.
func (o *Outbox) ListEvents(ctx context.Context, ws string, q ListQuery) (Page, error) {
	var from int64
	if q.Cursor != "" {
		n, err := decodeCursor(q.Cursor)
		if err != nil {
			return Page{}, err
		}
		from = n
	} else {
		h, err := o.head(ctx, ws)
		if err != nil {
			return Page{}, err
		}
		from = h
	}
	page := Page{Events: []EventView{}}
	seen := map[string]bool{}
	n := from
	const batch = 16
	for scanned := 0; n > 0 && len(page.Events) < q.Limit && scanned < maxScan; {
		k := min(int64(batch), n)
		entries := make([]logEntry, k)
		found := make([]bool, k)
		errs := make([]error, k)
		var wg sync.WaitGroup
		for i := range k {
			wg.Go(func() {
				err := o.evlog.FindOne(ctx, store.ByID(logID(ws, n-i))).Decode(&entries[i])
				found[i], errs[i] = err == nil, err
			})
		}
		wg.Wait()
		for i := range k {
			if !found[i] {
				if store.IsNotFound(errs[i]) { // expired: the log ends here
					return page, nil
				}
				return Page{}, msgapi.Unavailable(fmt.Errorf("read event log: %w", errs[i]))
			}
			en := entries[i]
			n, scanned = n-1, scanned+1
			if !q.Since.IsZero() && en.CreatedAt.Before(q.Since) {
				return page, nil // older than since: so is everything after it
			}
			if (q.Type == "" || en.Type == q.Type) && !seen[en.EventID] {
				seen[en.EventID] = true
				page.Events = append(page.Events, EventView{ID: en.EventID, Type: en.Type, CreatedAt: en.CreatedAt, Payload: en.Payload})
				if len(page.Events) == q.Limit {
					break
				}
			}
		}
	}
	if n > 0 {
		page.NextCursor = encodeCursor(n)
	}
	return page, nil
}

func encodeCursor(n int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("ev1:" + strconv.FormatInt(n, 10)))
}

func decodeCursor(c string) (int64, error) {
	bad := &msgapi.Error{Code: msgapi.CodeInvalid, Message: "the cursor is invalid",
		Fields: []msgapi.FieldError{{Field: "cursor", Message: "use the nextCursor of a previous page"}}}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, bad
	}
	s, ok := strings.CutPrefix(string(b), "ev1:")
	if !ok {
		return 0, bad
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, bad
	}
	return n, nil
}
