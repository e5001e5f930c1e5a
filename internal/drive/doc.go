// Package drive stores checksummed, durable block files in one local
// directory (a drive) and guards that directory with an identity file so it is
// never mixed into the wrong cluster or node.
//
// It is not a placement or replication layer: it knows nothing about pools,
// stripes beyond the header fields it records, or other drives; the block
// service (internal/block) exposes drives over gRPC and the client decides
// where blocks go.
package drive
