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

// ValidID reports whether id has the shape NewID(prefix) gives it: prefix,
// "_", and 26 characters of lower-case base32. Checking the shape first keeps
// an arbitrary client-sent string out of lookups and log lines.
func ValidID(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(rest) != idLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

// idLen is the length of the random part of an id: 128 bits in base32.
const idLen = 26
