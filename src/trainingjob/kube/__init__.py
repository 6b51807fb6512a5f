"""The ground floor for talking to Kubernetes, shared by every program of the project (the operator, the node
agent, the UI, the CLI, the webhooks): the one LIST + WATCH loop (reflector.py) and its one backoff (backoff.py),
resource quantities (quantity.py), the API server's own words in a refusal (status.py) and a YAML syntax error in
one line (yaml_text.py).

Nothing here imports any other trainingjob package: everything else may import it.
"""
