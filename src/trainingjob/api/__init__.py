"""The TrainingJob API: names, the CRD schema (the one source of truth) and a typed view of spec and status."""
