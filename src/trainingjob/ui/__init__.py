"""`tj ui`: a web UI for TrainingJobs that acts with the user's own credentials (docs/ui.md).

The server mirrors TrainingJobs from one watch into memory, pushes changes to browsers over Server-Sent Events,
records the progress history each job's status shows while it runs, and forwards actions (create, suspend,
resume, scale, delete) and log streams to the API server with the kubeconfig of whoever started it.
"""
