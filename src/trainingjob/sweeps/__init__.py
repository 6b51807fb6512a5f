"""The TrainingSweep planner (docs/sweeps.md): pure functions from a sweep and its trials to the trials to create
or stop and the sweep's status. study.py is the only module that imports Optuna (the `[sweeps]` extra)."""
