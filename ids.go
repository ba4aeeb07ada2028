package msgapi

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns prefix + "_" + 26 characters of lower-case base32 over 128
// random bits, e.g. "msg_k5v3...". Ids are allocated by the process that
// writes the document, so a lock can name its message before it exists.
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms (crypto/rand docs)
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}
