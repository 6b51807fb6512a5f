"""The running operator: informers and their caches, the work queue, and the one place that writes to the API."""
