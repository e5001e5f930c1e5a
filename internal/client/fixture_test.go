package client_test

import (
	"context"

	"github.com/weftfs/weft/internal/client/clienttest"
)

// The tests of this package run on a clienttest.Fixture: 3 nodes × 4
// drives of real block services on loopback, a memkv namespace and a fake
// topology.

var bg = context.Background()

const (
	kib = clienttest.KiB
	mib = clienttest.MiB
	// testUnit is the unit size of most tests: small stripes, many of them.
	testUnit = clienttest.Unit
)
