package server

import (
	"context"
	"errors"
	"time"
)

// ErrCrashed is what Wait returns after Crash.
var ErrCrashed = errors.New("server: crashed (Crash: an in-process kill)")

// Crash stops the node as abruptly as a kill of its process (SIGKILL)
// would, for clusters whose nodes run inside one process (the test
// harness's in-process mode); a node run by `weft server` is killed for
// real instead. Compared with a graceful stop (Wait's shutdown):
//
//   - it stops serving at once: the admin API's and the block service's
//     listeners and connections are closed and requests in flight are cut
//     off, with no drain;
//   - nothing more reaches the control plane: the etcd client is closed
//     first, so the node's lease is not revoked (the node shows down when
//     the lease expires, as a crashed node does), its job engine's lease
//     and task claims are left to expire, and no worker, job checkpoint or
//     drive usage is written after the crash;
//   - the embedded etcd member, if any, stops abruptly (etcdx.Member.Crash:
//     no leadership transfer, connections reset);
//   - nothing is flushed that a crash would lose: a block is durable when
//     its put is acknowledged and a put cut off leaves a temporary file,
//     removed at the next start, as after a kill.
//
// It then releases what the kernel releases when a process dies — the
// node's workers, drive locks, ports and the member's data directory —
// so that the node can be started again in the same process. It returns
// when that is done (the job engine's goroutines may end a few seconds
// later: they hold nothing a restart needs and can write nothing); Wait
// then returns ErrCrashed. Crash is idempotent, and does nothing once a
// graceful stop has begun.
func (s *Server) Crash() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.log.Warn("node crashing (an in-process kill)")
		if s.admin != nil {
			_ = s.admin.Close()
		} else if s.adminLis != nil {
			s.adminLis.Close()
		}
		if s.nfs != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			s.nfs.stopAll(ctx)
			cancel()
		}
		for _, l := range s.nfsLis {
			l.Close()
		}
		if s.grpc != nil {
			s.grpc.Stop()
		} else if s.grpcLis != nil {
			s.grpcLis.Close()
		}
		// Before anything else stops: a stopping job engine or worker
		// would write (revoke leases, checkpoint), and must fail instead.
		if s.etcd != nil {
			s.etcd.Close()
		}
		s.member.Crash()
		// What follows only releases the process's resources: every
		// write to etcd fails now. The job engine is cancelled but not
		// waited for (Stop with a context already done): its goroutines
		// end by themselves, its lease's revoke is retried on the closed
		// client for seconds (and fails), and it holds nothing a restart
		// of the node needs.
		if s.jobs != nil {
			done, cancel := context.WithCancel(context.Background())
			cancel()
			_ = s.jobs.Stop(done)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := s.run.Stop(ctx); err != nil {
			s.log.Warn("stopping the crashed node's workers", "err", err)
		}
		cancel()
		if s.nfs != nil && s.nfs.crashed != nil {
			s.nfs.crashed()
		}
		s.closeLocal()
		s.log.Info("node crashed")
	})
}
