package send

// Scheduled sends (README: Scheduled sends). A request with a sendAt in
// the future runs the send path up to the commit point exactly like a send
// — duplicate guard, Idempotency-Key, lead, message insert — and its
// message is written "scheduled" instead of being handed to a provider.
// Before that insert, its due time is recorded in the schedule (package
// schedule: a slot in the bucket of its minute), and its cancellation key,
// if any.
//
// Every process runs a Scheduler. Each tick it reads the slots of the
// buckets from its low water (the oldest bucket with a message it has not
// seen finished, at least the last Margin) to the next minute — a few reads
// by _id, however many messages are due later — and, for each message whose
// time has come, decides its fate with one insert (schedule.Store.Decide):
//
//   - "send": this process won; it moves the message to sending, calls the
//     provider once and records the outcome like any send. The decision is
//     the commit point: no other process, and no cancel, can win it after.
//   - "cancel" (a caller's cancel won first), "suppress" (the recipient is
//     on the suppression list now) or "refuse" (the workspace is disabled):
//     the message becomes canceled, suppressed or failed, never sent.
//
// A process that loses the "send" decision to another watches the message
// until it is final; if the winner stays silent for After (the send
// timeout plus a margin) on this process's own clock, the winner died in
// its provider call and the message becomes unknown, as the outcome
// sweeper decides a lost send: it may have been delivered, so it is never
// sent again. A slot whose message does not exist when it is due belongs
// to an acceptor that died (or stalls) between the two inserts: the id is
// fenced (messages.Store.Fence), so that acceptor can never write it.
//
// The process that accepted a message tries it at its time; the others
// wait PeerDelay more, which spares the embedded engine an insert per
// process per message while the acceptor is alive.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/msgapi/msgapi"
	"github.com/msgapi/msgapi/events"
	"github.com/msgapi/msgapi/messages"
	"github.com/msgapi/msgapi/schedule"
	"github.com/msgapi/msgapi/sender"
	"github.com/msgapi/msgapi/workspace"
)

// CodeWorkspaceDisabled is the error code of a scheduled message whose
// workspace was disabled before its time.
const CodeWorkspaceDisabled = "workspace_disabled"

// schedule records m's cancellation key and due time (req is its request)
// and its message.scheduled event, before the message insert.
func (s *Service) schedule(ctx context.Context, m *messages.Message, req Request) error {
	o := s.o
	if req.CancellationKey != "" {
		if err := o.Schedule.AddKey(ctx, m.WorkspaceID, req.CancellationKey, m.ID, req.SendAt); err != nil {
			return err
		}
	}
	if err := o.Schedule.Add(ctx, m.WorkspaceID, m.ID, req.SendAt); err != nil {
		return err
	}
	if o.OnScheduled != nil {
		m.CreatedAt, m.UpdatedAt = time.Now().UTC(), time.Now().UTC()
		if err := o.OnScheduled(ctx, *m); err != nil {
			return err
		}
	}
	return nil
}

// Cancel cancels the scheduled message id of workspace ws: exactly one of
// this cancel and the scheduler's send wins (one insert decides). A
// message that is already canceled answers as canceled; one that is not
// scheduled any more (sent, sending, suppressed, …) is a CodeNotCancelable
// error carrying the message.
func (s *Service) Cancel(ctx context.Context, ws workspace.Workspace, id string) (messages.Message, error) {
	m, err := s.o.Messages.GetForWorkspace(ctx, ws.ID, id)
	if err != nil {
		return messages.Message{}, err
	}
	return s.cancel(ctx, m)
}

// CancelByKey cancels every scheduled message of workspace ws that was
// given cancellation key key. It returns the messages it canceled (or that
// were canceled already) and those it could not cancel (their time came
// first), oldest first.
func (s *Service) CancelByKey(ctx context.Context, ws workspace.Workspace, key string) (canceled, notCanceled []messages.Message, err error) {
	if s.o.Schedule == nil {
		return nil, nil, nil
	}
	ids, err := s.o.Schedule.KeyMessages(ctx, ws.ID, key, maxKeyMessages)
	if err != nil {
		return nil, nil, err
	}
	for _, id := range ids {
		m, found, err := s.o.Messages.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if !found {
			// Its request recorded the key and has not written the
			// message (yet): decide it canceled, so that if the message
			// appears it is never sent.
			if _, _, err := s.o.Schedule.Decide(ctx, id, schedule.Cancel, "cancellation key", time.Now()); err != nil {
				return nil, nil, err
			}
			continue
		}
		if m.WorkspaceID != ws.ID || m.Status == messages.StatusTombstone {
			continue
		}
		got, err := s.cancel(ctx, m)
		switch {
		case msgapi.ErrorCode(err) == msgapi.CodeNotCancelable:
			notCanceled = append(notCanceled, got)
		case err != nil:
			return nil, nil, err
		default:
			canceled = append(canceled, got)
		}
	}
	return canceled, notCanceled, nil
}

// maxKeyMessages bounds the messages one cancellation key cancels.
const maxKeyMessages = 1000

func (s *Service) cancel(ctx context.Context, m messages.Message) (messages.Message, error) {
	switch {
	case m.Status == messages.StatusCanceled:
		return m, nil
	case m.Status != messages.StatusScheduled || m.SendAt == nil || s.o.Schedule == nil:
		return m, notCancelable(m, "")
	}
	d, won, err := s.o.Schedule.Decide(ctx, m.ID, schedule.Cancel, "cancel", *m.SendAt)
	if err != nil {
		return m, err
	}
	if !won && d.Kind != schedule.Cancel {
		if cur, found, err := s.o.Messages.Get(ctx, m.ID); err == nil && found {
			m = cur
		}
		return m, notCancelable(m, d.Kind)
	}
	// The decision is taken; this write only shows it. If it fails, the
	// next cancel (or the scheduler at the message's time) writes it.
	m.Status, m.Error = messages.StatusCanceled, "canceled before its time"
	if err := s.o.Messages.RecordOutcome(ctx, &m); err != nil {
		return m, storeError(err)
	}
	zerolog.Ctx(ctx).Info().Str("event", events.Canceled).Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).Msg("scheduled message canceled")
	return m, nil
}

// storeError is err as the caller sees it: the store's failures (the
// driver's server, network and timeout errors) are 503; anything else, such
// as a message the event recorder cannot encode, is internal.
func storeError(err error) error {
	var se mongo.ServerError
	if errors.As(err, &se) || mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return msgapi.Unavailable(err)
	}
	return err
}

func notCancelable(m messages.Message, decided string) error {
	msg := fmt.Sprintf("the message is %s: only a scheduled message can be canceled", m.Status)
	switch decided {
	case schedule.Send:
		msg = "the message's time came before the cancel: it is being sent or was sent"
	case schedule.Suppress:
		msg = "the message was suppressed at its time: the recipient had opted out"
	case schedule.Refuse:
		msg = "the message was refused at its time: the workspace was disabled"
	}
	return &msgapi.Error{Code: msgapi.CodeNotCancelable, Message: msg, Doc: m}
}

// localSet remembers the scheduled messages this process accepted, until
// an hour after their time.
type localSet struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

func newLocalSet() *localSet { return &localSet{ids: map[string]time.Time{}} }

func (l *localSet) add(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ids) >= 100000 {
		for k, t := range l.ids {
			if time.Since(t) > time.Hour {
				delete(l.ids, k)
			}
		}
	}
	l.ids[id] = at
}

func (l *localSet) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.ids[id]
	return ok
}

// SchedulerOptions configure Service.Scheduler.
type SchedulerOptions struct {
	// After: a message whose send another process decided and that is
	// still scheduled or sending this long later, on this process's
	// clock, is unknown (the send timeout plus a margin). Required.
	After time.Duration
	// Tick is how often the schedule is read (default 1 s).
	Tick time.Duration
	// Margin is how far back every tick reads the schedule again (default
	// 2 min): a slot inserted late into a bucket is found within it.
	Margin time.Duration
	// PeerDelay is how long after a message's time a process that did not
	// accept it waits before trying it (default 2 s).
	PeerDelay time.Duration
	// Concurrency bounds the due messages handled at once (default 16).
	Concurrency int
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log zerolog.Logger
	// Lost, optional, counts each message that became unknown.
	Lost func()
}

// Scheduler sends scheduled messages at their time. Pass and Run are not
// for concurrent use with each other; the work they start is.
type Scheduler struct {
	s   *Service
	o   SchedulerOptions
	by  string
	sem chan struct{}
	wg  sync.WaitGroup

	started  bool
	low      int64 // the oldest bucket still walked
	lowSaved int64
	buckets  map[int64]*walked

	mu   sync.Mutex // guards walked.due and busy
	busy map[string]bool
}

// walked is one bucket as this process has read it.
type walked struct {
	next int64               // the next slot to read
	due  map[string]*dueSend // messages of this bucket not seen finished
}

type dueSend struct {
	slot       schedule.Slot
	watchSince time.Time // when this process first saw another's send decision unfinished
}

// Scheduler returns the service's scheduler; nil without Options.Schedule.
func (s *Service) Scheduler(o SchedulerOptions) *Scheduler {
	if s.o.Schedule == nil {
		return nil
	}
	if o.After <= 0 {
		panic("send.Scheduler: After is required")
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Margin <= 0 {
		o.Margin = 2 * time.Minute
	}
	if o.PeerDelay <= 0 {
		o.PeerDelay = 2 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Lost == nil {
		o.Lost = func() {}
	}
	host, _ := os.Hostname()
	return &Scheduler{s: s, o: o, by: host + "/" + strconv.Itoa(os.Getpid()), sem: make(chan struct{}, o.Concurrency),
		buckets: map[int64]*walked{}, busy: map[string]bool{}}
}

// lookahead: the next minute's bucket is read before it begins.
const lookahead = time.Minute

// Pass reads the schedule once and starts the work of every message whose
// time has come. It returns the number of messages it started.
func (sc *Scheduler) Pass(ctx context.Context) (int, error) {
	st := sc.s.o.Schedule
	now := sc.o.Now()
	floor := schedule.Bucket(now.Add(-sc.o.Margin))
	if !sc.started {
		b, ok, err := st.LowWater(ctx)
		if err != nil {
			return 0, err
		}
		// After an outage, the walk starts where the schedulers left off
		// (nothing due during it is skipped), but never before the oldest
		// slot that can still exist.
		if !ok || b > floor {
			b = floor
		}
		b = max(b, schedule.Bucket(now.Add(-schedule.MaxAhead-schedule.Retention)))
		sc.low, sc.lowSaved, sc.started = b, b, true
	}
	hi := schedule.Bucket(now.Add(lookahead))
	for b := sc.low; b <= hi; b++ {
		w := sc.buckets[b]
		if w == nil {
			w = &walked{next: 1, due: map[string]*dueSend{}}
			sc.buckets[b] = w
		}
		slots, next, err := st.Slots(ctx, b, w.next, 1000)
		w.next = next
		sc.mu.Lock()
		for _, sl := range slots {
			if _, ok := w.due[sl.MessageID]; !ok {
				w.due[sl.MessageID] = &dueSend{slot: sl}
			}
		}
		sc.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}

	started := 0
	sc.mu.Lock()
	for b, w := range sc.buckets {
		for id, d := range w.due {
			at := d.slot.SendAt
			if !sc.s.local.has(id) {
				at = at.Add(sc.o.PeerDelay)
			}
			if sc.busy[id] || now.Before(at) {
				continue
			}
			sc.busy[id] = true
			started++
			sc.wg.Add(1)
			go sc.handle(ctx, b, d)
		}
	}
	// The low water is the oldest bucket with a message not seen
	// finished, or the margin's; the buckets below it are forgotten.
	low := floor
	for b, w := range sc.buckets {
		if len(w.due) > 0 {
			low = min(low, b)
		}
	}
	for b := range sc.buckets {
		if b < low {
			delete(sc.buckets, b)
		}
	}
	sc.mu.Unlock()
	sc.low = low
	if low != sc.lowSaved {
		if err := st.SetLowWater(ctx, low); err == nil {
			sc.lowSaved = low
		}
	}
	return started, nil
}

// handle runs one due message and forgets it when it is finished.
func (sc *Scheduler) handle(ctx context.Context, b int64, d *dueSend) {
	defer sc.wg.Done()
	sc.sem <- struct{}{}
	done, err := sc.due(ctx, d)
	<-sc.sem
	if err != nil && ctx.Err() == nil {
		sc.o.Log.Warn().Err(err).Str("event", events.ScheduleStoreError).Str("messageId", d.slot.MessageID).
			Msg("scheduled message: the store failed; trying again at the next tick")
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	delete(sc.busy, d.slot.MessageID)
	if done {
		if w := sc.buckets[b]; w != nil {
			delete(w.due, d.slot.MessageID)
		}
	}
}

// due decides and does what a due message needs; done says that this
// process has nothing more to do for it.
func (sc *Scheduler) due(ctx context.Context, d *dueSend) (done bool, err error) {
	s, id := sc.s, d.slot.MessageID
	m, found, err := s.o.Messages.Get(ctx, id)
	if err != nil {
		return false, err
	}
	if !found {
		// Its acceptor recorded the slot and has not written the message
		// by its time: fence the id so that it never can (its request is
		// answered "pending" and its caller's retry schedules afresh).
		won, err := s.o.Messages.Fence(ctx, "scheduler: the message was missing at its time", id)
		if err != nil {
			return false, err
		}
		if won[0] {
			sc.o.Log.Warn().Str("event", events.ScheduleFenced).Str("workspaceId", d.slot.WorkspaceID).Str("messageId", id).
				Msg("scheduled message missing at its time: its request stalled or died before writing it; fenced, never sent")
		}
		return won[0], nil
	}
	switch m.Status {
	case messages.StatusScheduled:
	case messages.StatusSending:
		return sc.watch(ctx, d, m)
	default:
		return true, nil // final (or a tombstone): nothing to do
	}

	kind, source := schedule.Send, ""
	w, err := s.o.Workspaces(ctx, m.WorkspaceID)
	switch {
	case msgapi.ErrorCode(err) == msgapi.CodeNotFound:
		kind = schedule.Refuse
	case err != nil:
		return false, err
	case w.Disabled:
		kind = schedule.Refuse
	}
	if kind == schedule.Send && s.o.Suppressed != nil {
		src, suppressed, err := s.o.Suppressed(ctx, m.WorkspaceID, m.RecipientPhone+m.RecipientEmail)
		if err != nil {
			return false, err
		}
		if suppressed {
			kind, source = schedule.Suppress, src
		}
	}
	dec, won, err := s.o.Schedule.Decide(ctx, id, kind, sc.by, d.slot.SendAt)
	if err != nil {
		return false, err
	}
	switch dec.Kind {
	case schedule.Send:
		if !won {
			return sc.watch(ctx, d, m)
		}
		sc.send(ctx, &m)
		return true, nil
	case schedule.Cancel:
		m.Status, m.Error = messages.StatusCanceled, "canceled before its time"
	case schedule.Suppress:
		m.Status, m.ErrorCode = messages.StatusSuppressed, sender.CodeOptedOut
		m.Error = "not sent: the recipient opted out before the message's time"
		if source != "" {
			m.Error = "not sent: the recipient is on the suppression list (source " + source + ")"
		}
	case schedule.Refuse:
		m.Status, m.ErrorCode = messages.StatusFailed, CodeWorkspaceDisabled
		m.Error = "not sent: the workspace was disabled before the message's time"
	default:
		return false, fmt.Errorf("scheduled message %s: unknown decision %q", id, dec.Kind)
	}
	if err := s.o.Messages.RecordOutcome(ctx, &m); err != nil {
		return false, err
	}
	if won {
		ev := sc.o.Log.Info().Str("event", events.Canceled)
		switch dec.Kind {
		case schedule.Suppress:
			ev = sc.o.Log.Info().Str("event", events.Suppressed).Str("source", source)
		case schedule.Refuse:
			ev = sc.o.Log.Warn().Str("event", events.SendFailed).Str("error", m.Error)
		}
		ev.Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).Str("channel", m.Channel).Str("status", m.Status).
			Msg("scheduled message not sent at its time")
	}
	return true, nil
}

// watch follows a message whose send another process won. Silence for
// After on this clock means that process died during its send: the
// message is unknown, never sent again.
func (sc *Scheduler) watch(ctx context.Context, d *dueSend, m messages.Message) (bool, error) {
	now := sc.o.Now()
	sc.mu.Lock()
	since := d.watchSince
	if since.IsZero() {
		d.watchSince = now
	}
	sc.mu.Unlock()
	if since.IsZero() || now.Sub(since) < sc.o.After {
		return false, nil
	}
	m.Status, m.Error = messages.StatusUnknown, LostError
	if err := sc.s.o.Messages.RecordOutcome(ctx, &m); err != nil {
		return false, err
	}
	sc.o.Lost()
	sc.o.Log.Warn().Str("event", events.OutcomeLost).Str("workspaceId", m.WorkspaceID).Str("messageId", m.ID).
		Str("channel", m.Channel).Msg("scheduled send lost: the process that decided to send it stayed silent past the send timeout; now unknown")
	return true, nil
}

// send sends a scheduled message whose "send" decision this process won:
// sending, the provider once, the outcome.
func (sc *Scheduler) send(ctx context.Context, m *messages.Message) {
	s := sc.s
	snd, ok := s.o.Senders[m.Channel]
	if m.Test {
		snd, ok = s.o.TestSender, s.o.TestSender != nil
	}
	ctx = context.WithoutCancel(ctx)
	ctx = sc.o.Log.With().Str("messageId", m.ID).Logger().WithContext(ctx)
	if !ok {
		m.Status, m.Error = messages.StatusFailed, "not sent: no provider is configured for channel "+m.Channel
		s.recordOutcome(ctx, m)
		return
	}
	s.inflight.Store(m.ID, m.WorkspaceID)
	defer s.inflight.Delete(m.ID)
	m.Provider, m.Status = snd.Name(), messages.StatusSending
	if err := s.o.Messages.RecordOutcome(ctx, m); err != nil {
		// Only what readers see: the decision is the commit point, and
		// the outcome below moves the message on from scheduled too.
		zerolog.Ctx(ctx).Warn().Err(err).Msg("scheduled message: could not mark it sending; sending anyway")
	}
	res := snd.Send(ctx, toSenderMessage(m))
	m.Status, m.ProviderMessageID, m.Error, m.ErrorCode = string(res.Status), res.ProviderMessageID, res.Error, res.Code
	s.recordOutcome(ctx, m)
}

// Run passes every Tick until ctx ends, then waits for the sends it
// started. A failed pass is logged and retried at the next tick.
func (sc *Scheduler) Run(ctx context.Context) {
	t := time.NewTicker(sc.o.Tick)
	defer t.Stop()
	for {
		if _, err := sc.Pass(ctx); err != nil && ctx.Err() == nil {
			sc.o.Log.Warn().Err(err).Str("event", events.ScheduleStoreError).Msg("scheduler: could not read the schedule; reading again at the next tick")
		}
		select {
		case <-ctx.Done():
			sc.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// Wait waits for the work Pass started (tests).
func (sc *Scheduler) Wait() { sc.wg.Wait() }

// Pending lists the message ids this scheduler has read and not seen
// finished, sorted (tests, diagnostics).
func (sc *Scheduler) Pending() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []string
	for _, w := range sc.buckets {
		for id := range w.due {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
