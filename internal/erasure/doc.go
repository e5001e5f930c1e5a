// Package erasure describes stripe protection (mirror:N, ec:K+M) and its
// geometry, and encodes and reconstructs stripes.
//
// It is pure: it does no I/O and knows nothing of drives, nodes or metadata.
package erasure
