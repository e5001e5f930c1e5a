// Package block is a node's block service: it serves the blocks of the
// node's drives over gRPC (Service), gives other processes a typed client
// (Client) and exports the drives' I/O counters to Prometheus (Collector).
//
// It is not placement or striping: callers choose the drive of every block;
// QoS enforcement will hook in here but is not implemented yet.
package block
