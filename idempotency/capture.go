package idempotency

import (
	"bytes"
	"net/http"
)

// maxStored bounds the response body kept for replay. msgapi's responses
// are a few KiB; one that is larger is answered but not stored.
const maxStored = 1 << 20

// capture tees a response into memory while it streams to the client, so
// the middleware can store exactly the bytes the client got.
type capture struct {
	http.ResponseWriter
	status      int
	contentType string
	body        bytes.Buffer
	overflow    bool
}

func (w *capture) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are interim, not the response
		w.status = code
		w.contentType = w.Header().Get("Content-Type")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *capture) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.contentType = w.Header().Get("Content-Type")
	}
	n, err := w.ResponseWriter.Write(b)
	if !w.overflow {
		if w.body.Len()+n > maxStored {
			w.overflow = true
			w.body = bytes.Buffer{}
		} else {
			w.body.Write(b[:n])
		}
	}
	return n, err
}

// Unwrap lets http.ResponseController (echo's Flush and Hijack) reach the
// connection's writer.
func (w *capture) Unwrap() http.ResponseWriter { return w.ResponseWriter }
