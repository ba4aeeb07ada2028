package inbound

// SetAfterMessage makes f run after the inbound message is written and
// before completion is recorded; an error from f is a crash at that point.
func SetAfterMessage(h *Handler, f func() error) { h.afterMessage = f }
