"""TrainingJobs as Kueue workloads, the external-controller pattern (as AppWrapper and the Spark operator do).

Kueue's scheduler never looks at a job's kind: the job's own controller creates and owns one Workload
(`workloads.kueue.x-k8s.io`) describing what the job needs, Kueue admits it into a ClusterQueue's quota (or evicts it
to make room), and the controller runs workers only while it is admitted. Pure modules:
- workload.py: the Workload a job needs (one pod set per role: counts, pod templates with requests, priority);
- admission.py: what a Workload, ResourceFlavor and WorkloadPriorityClass say, read from their API objects;
- planner.py: (job's queue inputs, its Workload, the flavors) -> what to do: create or replace the Workload, hold
  the workers (Queued, with Kueue's reason), stop them on eviction and give the quota back, or run them with the
  admitted flavors' node selectors and tolerations.
"""
