// Package checkstream writes and checks self-describing data streams: every
// block of a stream carries a magic, the format's version, the stream's id,
// its own offset, the stream's size and a CRC32C of itself, and a payload
// derived from (id, offset), so that a copy of the stream shows, byte for
// byte, what of it is valid, zeroed, corrupt, misplaced or missing.
//
// It is not a file-system check: it knows nothing of weft and reads any
// file or pipe (`weft checkstream`), the proof that a copy through a
// gateway that failed over lost no byte.
package checkstream
