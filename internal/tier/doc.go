// Package tier decides what a pool policy's MIGRATE, DELETE and LIST
// rules do to the files of the namespace: it evaluates each inode once
// for every rule and plans the migrations against the pools' usage. The
// tier job and the dry run of weft policy test both use it, so that the
// dry run predicts exactly what the job then does.
//
// It is not the job (package jobs runs it over the cluster) nor the
// language (package policy parses and evaluates rules on one file).
package tier
