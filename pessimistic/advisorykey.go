package pessimistic

import "hash/fnv"

// AdvisoryKey maps a string lock name to the int64 key space of PostgreSQL
// advisory locks (pg_advisory_lock(bigint) and friends).
//
// The hash is 64-bit FNV-1a over the UTF-8 bytes of s, computed in the client
// and reinterpreted as a two's-complement int64, so the value is negative for
// about half the names. It is deliberately not the server's
// hashtextextended(): the client-side hash costs no round trip, never changes
// with the server version, and any other language can reproduce it exactly
// (FNV-1a 64: offset basis 0xcbf29ce484222325, prime 0x100000001b3).
//
// Distinct names can collide (probability about n²/2⁶⁵ for n names); a
// collision makes two names share one lock, which costs concurrency, never
// safety. AdvisoryKey("") is the FNV offset basis, -3750763034362895579.
func AdvisoryKey(s string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s)) // hash.Hash.Write never returns an error
	return int64(h.Sum64())
}
