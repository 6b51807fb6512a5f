"""The running operator: Kopf glue (handlers), the work queue, and the one place that writes to the API."""
