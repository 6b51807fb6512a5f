"""TensorFlow parameter server training (ParameterServerStrategy) with a chief, parameter servers, workers and an
evaluator, each pod told its part by the TF_CONFIG the operator writes (spec.roles).

- `ps` and `worker` tasks start a tf.distribute.Server and serve until the job ends (the operator deletes them
  once the chief has succeeded): the variables live on the parameter servers, the workers run the steps;
- the `chief` is the coordinator: it builds the model under the strategy (its variables are spread over the
  parameter servers), schedules training steps on the workers with a ClusterCoordinator, writes a checkpoint
  after every epoch into CHECKPOINT_DIR (storage every pod mounts) and reports progress to the operator;
- the `evaluator` is not part of the training cluster (TensorFlow's sidecar evaluation): it evaluates every new
  checkpoint on held-out data and writes `evaluation-<epoch>.json` beside it; the chief shows the last one.

Every task prints one `{"event": "task", ...}` JSON line with the cluster spec and task TensorFlow resolved; the
chief also prints where the variables live and which workers ran steps. The data is scikit-learn's digits (8x8
images, 10 classes), split by `seed` the same way everywhere.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

try:
    from trainingjob import sdk
except ImportError:  # the SDK directory copied into the image on its own
    import trainingjob_sdk as sdk

log = logging.getLogger("train_ps")

DEFAULTS: dict[str, Any] = {
    "epochs": 5,
    "stepsPerEpoch": 20,
    "batchSize": 64,
    "learningRate": 0.1,
    "hiddenSize": 64,
    "seed": 42,
    "evaluationWaitSeconds": 120,  # how long the chief waits at the end for the evaluator's last result
    "serverWaitSeconds": 600,  # how long the chief waits at the start for the ps and workers to listen
}


def hyperparameters() -> dict[str, Any]:
    """DEFAULTS with spec.hyperparameters (the file TRAININGJOB_HYPERPARAMETERS_FILE names) over them."""
    params = dict(DEFAULTS)
    try:
        with open(os.environ.get("TRAININGJOB_HYPERPARAMETERS_FILE", "")) as handle:
            given = json.load(handle)
    except (OSError, ValueError):
        given = {}
    for key, default in DEFAULTS.items():
        if key in given:
            params[key] = type(default)(given[key])
    return params


def say(**event: Any) -> None:
    print(json.dumps(event, sort_keys=True, default=str), flush=True)


def digits(seed: int) -> tuple[Any, Any, Any, Any]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    features = (data.data / 16.0).astype("float32")
    return train_test_split(features, data.target, test_size=0.2, random_state=seed, stratify=data.target)


def build_model(tf: Any, params: dict[str, Any]) -> Any:
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(64,)),
            tf.keras.layers.Dense(params["hiddenSize"], activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )


def checkpoint_path(epoch: int) -> Path:
    return sdk.checkpoint_dir() / f"ckpt-{epoch:08d}"


def serve(tf: Any, resolver: Any) -> None:
    """ps and worker: a server in the cluster, until the job ends."""
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    say(event="serving", target=server.target)
    while True:  # not server.join(): a wait in C++ would never run the SIGTERM handler
        time.sleep(3600)


def wait_for_servers(cluster: dict[str, list[str]], seconds: float) -> None:
    """Until every ps and worker accepts connections: pods start in any order, their DNS names appear as they get
    an IP, and ParameterServerStrategy fails at once on a task it cannot reach."""
    deadline = time.monotonic() + seconds
    for address in [a for role in ("ps", "worker") for a in cluster.get(role, [])]:
        host, port = address.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                break
            except OSError as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{address} is still unreachable after {seconds:.0f}s: {error}") from None
                time.sleep(1)


def coordinate(tf: Any, resolver: Any, params: dict[str, Any]) -> None:
    """The chief: training steps scheduled on the workers, variables on the parameter servers."""
    wait_for_servers(resolver.cluster_spec().as_dict(), params["serverWaitSeconds"])
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    x_train, _, y_train, _ = digits(params["seed"])
    with strategy.scope():
        model = build_model(tf, params)
        optimizer = tf.keras.optimizers.SGD(learning_rate=params["learningRate"])
        train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
    say(event="variables", devices=sorted({v.device for v in model.trainable_variables}))

    def dataset_fn() -> Any:
        data = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        return data.shuffle(len(x_train), seed=params["seed"]).repeat().batch(params["batchSize"])

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(batches: Any) -> Any:
        def replica_fn(x: Any, y: Any) -> Any:
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            train_accuracy.update_state(y, logits)
            return loss

        x, y = next(batches)
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_fn, args=(x, y)), axis=None)
        return loss, tf.distribute.coordinator.experimental_get_current_worker_index()

    checkpoint = tf.train.Checkpoint(model=model)
    workers_used: set[int] = set()
    for epoch in range(1, params["epochs"] + 1):
        train_accuracy.reset_state()
        results = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(params["stepsPerEpoch"])]
        coordinator.join()
        losses = [result.fetch() for result in results]
        workers_used |= {int(worker) for _, worker in losses}
        loss = sum(float(value) for value, _ in losses) / len(losses)
        accuracy = float(train_accuracy.result())
        checkpoint.write(str(checkpoint_path(epoch)))
        say(event="epoch", epoch=epoch, loss=round(loss, 4), accuracy=round(accuracy, 4), workers=sorted(workers_used))
        sdk.report_progress(epoch=epoch, total_epochs=params["epochs"], metrics={"loss": loss, "accuracy": accuracy})
    evaluation = wait_for_evaluation(params["epochs"], params["evaluationWaitSeconds"])
    say(event="done", workers=sorted(workers_used), evaluation=evaluation)
    sdk.flush()


def wait_for_evaluation(epoch: int, seconds: float) -> dict[str, Any] | None:
    """The evaluator's result for the last checkpoint, if it comes within `seconds` (it is optional)."""
    result = sdk.checkpoint_dir() / f"evaluation-{epoch:08d}.json"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result.exists():
            return json.loads(result.read_text())
        time.sleep(1)
    return None


def evaluate(tf: Any, params: dict[str, Any]) -> None:
    """The evaluator: every new checkpoint, evaluated on the held-out digits, until the last epoch's."""
    _, x_valid, _, y_valid = digits(params["seed"])
    model = build_model(tf, params)
    checkpoint = tf.train.Checkpoint(model=model)
    done = 0
    while done < params["epochs"]:
        ready = [e for e in range(done + 1, params["epochs"] + 1) if Path(f"{checkpoint_path(e)}.index").exists()]
        if not ready:
            time.sleep(1)
            continue
        done = ready[-1]
        checkpoint.read(str(checkpoint_path(done))).expect_partial()
        predictions = tf.argmax(model(x_valid, training=False), axis=1)
        accuracy = float(tf.reduce_mean(tf.cast(tf.equal(predictions, y_valid), tf.float32)))
        result = {"epoch": done, "accuracy": round(accuracy, 4)}
        temp = sdk.checkpoint_dir() / f".evaluation-{done:08d}.json.tmp"
        temp.write_text(json.dumps(result))
        temp.replace(sdk.checkpoint_dir() / f"evaluation-{done:08d}.json")
        say(event="evaluation", **result)


def exit_on_sigterm() -> None:
    """Exit at once when the pod is deleted: a container's first process has no default SIGTERM action, and the
    servers (ps, workers) only ever stop that way, once the chief has succeeded."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(128 + signal.SIGTERM))


def main() -> int:
    exit_on_sigterm()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    params = hyperparameters()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    say(
        event="task",
        type=resolver.task_type,
        index=resolver.task_id,
        cluster=resolver.cluster_spec().as_dict(),
    )
    if resolver.task_type in ("ps", "worker"):
        serve(tf, resolver)
    elif resolver.task_type == "evaluator":
        evaluate(tf, params)
    else:
        coordinate(tf, resolver, params)
    return 0


if __name__ == "__main__":
    sys.exit(main())
