"""Kueue Workloads of TrainingJobs, in the operator (the pure parts are queueing/).

watches.py caches the jobs' Workloads and the cluster's ResourceFlavors and WorkloadPriorityClasses; decisions.py
turns a job and those caches into the queue planner's QueueDecision; reconciler.py is the Workload controller,
which keeps each queued job's Workload true (creates, replaces, deactivates it, gives an evicted job's quota back,
marks it Finished). The TrainingJob controller reads the same decision to hold or run the workers.
"""
