package msgapi

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strconv"
)

// Ids that decide races are derived by hashing, so that every process
// computes the same _id and one insert wins (SPEC: every hot-path read is
// by _id). Two framings are in use; each is stored, so neither may ever
// change (ids_pin_test.go pins them). Both make the field boundaries
// unambiguous: shifting characters between fields never gives the same id.

// HashID is hex of the first 16 bytes of SHA-256 over parts, each written as
// its decimal length, ":" and itself: the ids of leads, conversations,
// events, deliveries, inbound events, receipts and suppressions.
func HashID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p)) + ":" + p))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// HashFields is hex SHA-256 over fields, each framed by Frame: the ids of
// dedup locks, their takeovers and Idempotency-Key records.
func HashFields(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		Frame(h, f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Frame writes field to h after its length as 8 bytes, big-endian.
func Frame[T string | []byte](h hash.Hash, field T) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(field)))
	h.Write(n[:])
	h.Write([]byte(field))
}
