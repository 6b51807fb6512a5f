"""Gang scheduling: the gang objects of each scheduler (gang.py) and which of their APIs a cluster serves
(discovery.py)."""
