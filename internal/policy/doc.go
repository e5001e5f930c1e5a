// Package policy is the policy language of storage pools: it parses and
// checks administrators' rules (placement of new files, migration between
// pools, deletion, listing), evaluates them over a file's attributes, and
// plans threshold migrations — pure functions, the same for every caller.
//
// It is not the machinery around the rules: it moves no data (the tier job
// does), reads no namespace (the caller passes each file's attributes) and
// stores no policy (the admin API does, in the record of record.go); the
// client asks it where a new file goes.
package policy
