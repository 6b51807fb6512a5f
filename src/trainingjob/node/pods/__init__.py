"""One pod's life on the node, as the kubelet's pod worker drives it: sync (podworker.py), containers across their
attempts (slots.py), container -> launch spec (starter.py), pod status (status.py) and how a pod ends (podending.py)."""
