"""The TrainingSweep controller: hyperparameter search over TrainingJobs (docs/sweeps.md). It registers what it
reconciles (TrainingSweeps) and owns (their trials, TrainingJobs labelled with the sweep's name) in watches.py;
reconciler.py runs the pure sweep planner (sweeps/) on its caches and apply.py executes the plan through the one
writer. Optuna is loaded by engine.py only: without the `[sweeps]` extra the controller still runs and says so on
every sweep."""
