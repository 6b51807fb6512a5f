"""The progress endpoint: workers report epochs, metrics and checkpoints; the operator authenticates every report
(TokenReview of a pod-bound ServiceAccount token) and folds the newest one into the job's status."""
