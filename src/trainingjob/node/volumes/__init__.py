"""Pod volumes on the host (manager.py, the kubelet's volume manager) and atomic volume contents (payload.py)."""
