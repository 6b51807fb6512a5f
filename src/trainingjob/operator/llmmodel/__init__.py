"""The LLMModel controller: serving a trained model (docs/serving.md). It registers what it reconciles (LLMModels),
owns (their Deployment, Service and HorizontalPodAutoscaler) and watches (the TrainingJob a model serves the
checkpoints of) in watches.py; reconciler.py runs the pure serving planner (serving/) on its caches and apply.py
executes the plan through the one writer."""
