// Package clienttest runs a client over an in-process cluster for tests:
// a namespace on an in-memory kv, real block services on loopback, and a
// fake topology in which tests take drives and nodes down; with helpers to
// write, read back and damage files.
//
// It is test support, not production code: only tests import it (those
// of client and of the packages built over it, such as restripe).
package clienttest
