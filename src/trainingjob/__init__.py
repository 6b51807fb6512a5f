"""trainingjob-operator: run distributed ML training on Kubernetes with one TrainingJob resource."""

__version__ = "0.1.0"
