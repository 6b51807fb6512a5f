"""The operator's controller kit (controller-runtime's idea, in small): informers that keep trimmed, indexed views
of what the controllers read (informers.py, a kube/reflector.py Reflector per watch feeding a store.py
ResourceStore), a rate-limited work queue per controller (queue.py), expectations for writes the caches do not show
yet (expectations.py) and leader election (leader.py).

The kit imports no controller: what a controller watches, owns and reconciles is registered with it.
"""
