// Package tests holds weft's cluster tests: whole clusters started through
// package harness, each test body run multi-process (`weft local up` as a
// process: a process per node and mount, kill is SIGKILL) and in-process
// (the same supervisor, nodes and mounts inside the test process, kill is
// server.Server.Crash), as subtests named "process" and "inprocess".
//
// Which modes run: WEFT_HARNESS=process, inprocess or both chooses for
// every body; unset (make test), each body runs in its own default —
// harness.Both for most; harness.ProcessByDefault for the long ones
// (TestTreeDeleteLarge, TestRebalanceAfterDriveAdd,
// TestLowSpaceModeOnCluster), whose second run would cost the default
// suite more than it finds; harness.ProcessOnly for a body that needs a
// process of its own (TestTreeDeleteAndCollect sets a failpoint in one
// mount through its environment), skipped in-process with the reason.
// docs/architecture.md ("Cluster tests") says what differs in-process.
//
// Every test but those bounding stalls or rates in seconds calls
// t.Parallel: two run at a time (-parallel is the number of CPUs), and a test's in-process clusters wait for another
// test's to stop (harness.holdInProcess).
//
// Tests wait for what they need to see — a node down, a job ended, an
// open recorded in the namespace, every node's drainer through a whole
// step, blocks freed — by polling it with a deadline; they never sleep
// for a fixed time and hope.
package tests
