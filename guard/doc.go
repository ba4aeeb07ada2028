// Package guard is the atomic duplicate guard: the same text to the same
// recipient in the same workspace within the dedup window is sent once.
//
// For each request Acquire decides one of four things: the request may send
// (Won); an identical request already wrote its message, which is returned
// instead (Duplicate); an identical request holds the lock but has not written
// its message within the wait (Pending); or the store failed, and the request
// proceeds without protection because the guard never breaks the send path
// (Unguarded).
//
// Every race is decided by an insert against a unique _id, because that is the
// one write that is atomic both on MongoDB and on the embedded engine, whose
// conditional updates and deletes read, filter and write in separate steps.
// Winning the lock is an insert into message_dedup_locks (the lock is read
// first, so that a request that finds it held writes nothing: the read
// decides nothing, the insert does). Every later change
// of owner (an expired lock, a winner that died before writing its message, a
// message the provider rejected, a release, an operator's delete) is first
// claimed by inserting a takeover record whose _id hashes (lock id, message id
// of the holder being replaced). A message id names one holder only, so each
// generation of a lock is claimed at most once, and only its claimant
// rewrites or deletes the lock document, by _id (and gives back a lock that
// turns out to name a holder it never saw). The expiry reaper deletes locks
// through the same claims (Reap).
//
// Deciding the owner is not enough: a holder can stall past its lease, two
// processes' clocks can disagree, an operator can delete a lock. So the
// message id is the fence. The caller's insert of its message document under
// the id named in the lock is the commit point, and it sends only if that
// insert wins. Whoever declares a holder gone while its message is not
// written (lease, expiry, operator delete, release, reaper) first inserts a
// tombstone under the holder's message id (Options.Fence). If the tombstone
// wins, the holder's own insert fails later and it never sends; if it loses,
// the message exists and is the answer. And a request never wins a lock
// while any holder it has seen might have sent within its window: it
// resolves each of them first. Clocks then only decide who sends, never
// whether two do.
//
// A loser whose winner has not written its message yet waits for it without
// hammering the store: in the winner's own process it blocks until Written
// or Release, elsewhere it polls by _id with backoff.
//
// # A lock's life
//
// One lock document per (workspace, recipient, text), _id = LockID(key); it
// names one holder at a time (a message id), and each holder is a
// generation. Every move out of a generation is first claimed by inserting
// the takeover record hash(lock id, holder): one claim per generation wins.
//
//	insert the lock (unique _id): one winner, holder m1
//	     │
//	     ▼
//	[m1 holds it, unwritten] ── m1's message insert wins (the commit point) ──► [m1 holds it, written]
//
//	out of [unwritten], each after fencing m1 (a tombstone under its id) and claiming generation m1:
//	  m1's lease is over as seen by an identical request (m1 stalled or died) ──► m2
//	  the window is over ──► m2 (an identical request) or gone (the reaper)
//	  m1's request failed before writing its message (Release) ──► gone
//	  an operator's delete ──► gone
//	meanwhile identical requests wait for m1 up to their wait, then answer Pending.
//
//	out of [written], each after claiming generation m1:
//	  m1 reached no one (the provider refused it) ──► m2: an identical request sends again
//	  the window is over ──► m2 (an identical request) or gone (the reaper)
//	  an operator's delete ──► gone
//	meanwhile identical requests get m1's message (Duplicate).
//
//	m2:   the claimant rewrites the lock to name its own message id: the same life, next generation.
//	gone: the lock is deleted; the next identical request inserts a new one.
package guard
