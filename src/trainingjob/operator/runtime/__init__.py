"""The operator's controller kit (controller-runtime's idea, in small).

- controller.py: a Registration says what a controller reconciles, owns and watches (For / Owns / Watches); a
  Controller is its own rate-limited work queue (queue.py) and a bounded pool of workers running its reconcile.
- manager.py: every controller's watches merged into one set of informers, their changes routed to the controllers
  that registered for them, the one "caches synced" barrier, and leadership (leader.py) starting the workers.
- informers.py + store.py: a kube/reflector.py Reflector per watch feeding a ResourceStore of trimmed views, filed
  in indexes named by typed IndexNames (views.py helps index functions trim). What a controller writes of a watch
  that `stands_in` is read in place of the cached view until the cache shows it (informers.stand_in).
- expectations.py: per object, the pods created and deleted that the caches do not show yet.
- writer.py (+ calls.py): every API write, for every kind, with an Outcome instead of an exception for what
  controllers plan around.

The kit imports no controller: controllers (operator/trainingjob/, operator/llmmodel/) import the kit.
"""
