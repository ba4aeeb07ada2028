package test

import (
	"testing"

	"github.com/msgapi/msgapi/store/storetest"
)

// In-process tests (round-trip budgets) share one embedded engine.
func TestMain(m *testing.M) { storetest.Main(m) }
