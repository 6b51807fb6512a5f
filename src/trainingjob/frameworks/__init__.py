"""One module per ML framework: the environment and files its distributed launcher expects."""
