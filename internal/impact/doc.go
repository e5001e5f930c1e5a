// Package impact is the job engine's impact control: impact policies (a
// level per time-of-week window, stored in etcd), the levels' worker bounds
// and load thresholds, the node's load sampler (CPU, drive IOPS and queue
// depth), and the controller that turns them into each job's allowance of
// workers and duty cycle (it implements job.Throttle).
//
// It is not the job engine (package job runs jobs and asks a Throttle) and
// not the policy language of storage pools (package policy).
package impact
