package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
)

// Counter counts the commands (round trips) sent to the store, from the
// driver's command monitor. Round trips per request are exact and testable;
// they are the budget the hot paths are designed against.
type Counter struct {
	total atomic.Int64

	mu     sync.Mutex
	byName map[string]int64
	// observe, when set, receives each command's name and latency (metrics).
	observe func(cmd string, d time.Duration)
	// before, when set, runs synchronously before each command is sent.
	before func(ctx context.Context, e *event.CommandStartedEvent)
}

// NewCounter returns a zeroed counter.
func NewCounter() *Counter { return &Counter{byName: map[string]int64{}} }

// Monitor is the driver hook that feeds the counter.
func (c *Counter) Monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			c.total.Add(1)
			c.mu.Lock()
			c.byName[startedKind(e)]++
			before := c.before
			c.mu.Unlock()
			if before != nil {
				before(ctx, e)
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			c.emit(commandKind(e.CommandName), e.Duration)
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			c.emit(commandKind(e.CommandName), e.Duration)
		},
	}
}

// Observe registers a latency observer (set once, before traffic).
func (c *Counter) Observe(f func(cmd string, d time.Duration)) {
	c.mu.Lock()
	c.observe = f
	c.mu.Unlock()
}

func (c *Counter) emit(cmd string, d time.Duration) {
	c.mu.Lock()
	f := c.observe
	c.mu.Unlock()
	if f != nil {
		f(cmd, d)
	}
}

// Before registers a function that runs synchronously before each command
// is sent. Tests use it to stall one command at an exact point, the way a
// slow store, a GC pause or a SIGSTOP would; nil removes it.
func (c *Counter) Before(f func(ctx context.Context, e *event.CommandStartedEvent)) {
	c.mu.Lock()
	c.before = f
	c.mu.Unlock()
}

// Total is the number of commands started so far.
func (c *Counter) Total() int64 { return c.total.Load() }

// ByName returns a copy of the per-command counts.
func (c *Counter) ByName() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int64, len(c.byName))
	for k, v := range c.byName {
		m[k] = v
	}
	return m
}

// commandKind is the name a command's latency is observed under: the
// embedded engine's write into several collections (GroupWriteCommand) is
// an insert command like any other, and its read of several documents
// (GetCommand) a find, so the metrics compare across engines.
func commandKind(name string) string {
	switch name {
	case GroupWriteCommand:
		return "insert"
	case GetCommand:
		return "find"
	}
	return name
}

// startedKind is the name a command is counted under: commandKind's, except
// that a GroupWriteCommand that carries no insert, only replaces, counts as
// an update command.
func startedKind(e *event.CommandStartedEvent) string {
	if e.CommandName == GroupWriteCommand && len(insertParts(e)) == 0 {
		return "update"
	}
	return commandKind(e.CommandName)
}

// InsertCollections returns the collections that an insert command about
// to be sent writes into (nil for any other command): the one of an
// insert, each of a GroupWriteCommand. Tests use it to act on the insert
// into a given collection whichever way it travels.
func InsertCollections(e *event.CommandStartedEvent) []string {
	var names []string
	for _, p := range insertParts(e) {
		names = append(names, partCollection(p))
	}
	return names
}

// InsertDocuments returns the documents that an insert command about to be
// sent inserts into coll, whichever way it travels (an insert, or a part of
// a GroupWriteCommand); nil for any other command.
func InsertDocuments(e *event.CommandStartedEvent, coll string) []bson.Raw {
	var docs []bson.Raw
	for _, p := range insertParts(e) {
		if partCollection(p) != coll {
			continue
		}
		arr, ok := p.Lookup("documents").ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				docs = append(docs, d)
			}
		}
	}
	return docs
}

// UpdateCollections returns, for a command about to be sent, the collection
// of each update statement it carries (nil for a command that carries
// none): an update's, once per statement; each replace of a
// GroupWriteCommand's (Batch.ReplaceOne on the embedded engine). Tests use
// it to act on a conditional write of a given collection whichever way it
// travels.
func UpdateCollections(e *event.CommandStartedEvent) []string {
	var names []string
	switch e.CommandName {
	case "update":
		coll, _ := e.Command.Lookup("update").StringValueOK()
		arr, ok := e.Command.Lookup("updates").ArrayOK()
		if !ok {
			return nil
		}
		vals, _ := arr.Values()
		for range vals {
			names = append(names, coll)
		}
	case GroupWriteCommand:
		arr, ok := e.Command.Lookup("replaces").ArrayOK()
		if !ok {
			return nil
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if doc, ok := v.DocumentOK(); ok {
				coll, _ := doc.Lookup("collection").StringValueOK()
				names = append(names, coll)
			}
		}
	}
	return names
}

// insertParts are an insert command's parts, one per collection: an
// insert itself ({insert: <name>, documents}), each entry of a
// GroupWriteCommand's inserts ({collection: <name>, documents}).
func insertParts(e *event.CommandStartedEvent) []bson.Raw {
	switch e.CommandName {
	case "insert":
		return []bson.Raw{e.Command}
	case GroupWriteCommand:
		arr, ok := e.Command.Lookup("inserts").ArrayOK()
		if !ok {
			return nil
		}
		vals, _ := arr.Values()
		var parts []bson.Raw
		for _, v := range vals {
			if doc, ok := v.DocumentOK(); ok {
				parts = append(parts, doc)
			}
		}
		return parts
	}
	return nil
}

// partCollection is the collection of one of insertParts.
func partCollection(p bson.Raw) string {
	if name, ok := p.Lookup("insert").StringValueOK(); ok {
		return name
	}
	name, _ := p.Lookup("collection").StringValueOK()
	return name
}
