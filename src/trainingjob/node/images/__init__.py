"""What an image is on a process node: the image -> runtime catalog (catalog.py) and the cached venvs that stand in
for images (runtimes.py)."""
