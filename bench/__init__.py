"""Scale benchmark: this operator vs Kubeflow's training-operator vs raw pod creation (`make bench`)."""
