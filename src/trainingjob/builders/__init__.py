"""Pure builders: (job, index, config) -> manifest dicts. No I/O, so each is unit-tested without a server."""
