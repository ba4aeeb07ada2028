//go:build race

package store_test

// reapBacklog under the race detector, which slows the in-process engine
// several times over: the same rounds and batches, a smaller backlog.
// .ci/run also runs TestReapLargeBacklog without -race at full size.
const reapBacklog = 3_000
