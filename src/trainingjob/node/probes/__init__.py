"""Container probes as the kubelet runs them: their spec and threshold rules (spec.py), the handlers (handlers.py)
and one prober per running container attempt (prober.py); pods/probing.py applies their results."""
