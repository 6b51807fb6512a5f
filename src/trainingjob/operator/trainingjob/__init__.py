"""The TrainingJob controller. watches.py registers what it reconciles (TrainingJobs) and owns (workers, their
Service, EndpointSlices, ConfigMap, checkpoint PVC, gang objects); reconciler.py feeds the pure planner (reconcile/)
from the caches and what it remembers of each job (memory.py: one JobMemory per job); apply.py executes the plan
through the one writer. The rest are the reconciler's helpers: progress reports waiting for their write
(progress.py), MLflow run links (mlflow.py), worker names held by strangers (namesakes.py), quota turns
(quota_gate.py) and requeue delays (backoffs.py)."""
