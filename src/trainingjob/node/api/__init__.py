"""The node's conversation with the API server: its JSON client (client.py), LIST+WATCH into stores (informer.py),
the Node object, Lease and heartbeats (registration.py), and pod Events (events.py)."""
