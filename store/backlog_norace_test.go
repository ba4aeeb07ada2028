//go:build !race

package store_test

// reapBacklog is past 40,000: the backlog that used to fail every pass.
const reapBacklog = 41_000
