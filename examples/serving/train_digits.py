"""Train a small real model for the serving example: softmax regression on scikit-learn's bundled digits (8x8
images, 10 classes), plain numpy gradient descent, one checkpoint per epoch on the job's checkpoint volume.

Each checkpoint is an ``.npz`` with ``weights`` (64 x 10), ``bias`` (10), ``mean`` and ``scale`` (the feature
standardization) and ``classes``: everything examples/serving/model_server.py needs to answer predictions. The
chief alone trains and saves (this example runs one worker); it reports progress and, when the job has a tracking
server, logs to MLflow through the SDK.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from trainingjob_sdk import checkpoint_dir, is_chief, on_stop, report_progress, resume_checkpoint, save_checkpoint

try:  # MLflow tracking (trainingjob_sdk.tracking) is optional: older SDK copies do without it
    from trainingjob_sdk import tracking
except ImportError:  # pragma: no cover
    tracking = None


def hyperparameter(name: str, default: float) -> float:
    return float(os.environ.get(f"HYPERPARAM_{name.upper()}", default))


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def main() -> int:
    epochs = int(hyperparameter("epochs", 5))
    learning_rate = hyperparameter("learning_rate", 0.5)
    digits = load_digits()
    features, labels = digits.data.astype(np.float64), digits.target
    order = np.random.default_rng(0).permutation(len(labels))
    features, labels = features[order], labels[order]
    split = int(len(labels) * 0.8)
    mean, scale = features[:split].mean(axis=0), features[:split].std(axis=0) + 1e-6
    train_x, test_x = (features[:split] - mean) / scale, (features[split:] - mean) / scale
    train_y, test_y = labels[:split], labels[split:]
    classes = np.arange(10)
    weights, bias, start = np.zeros((64, 10)), np.zeros(10), 0
    if (found := resume_checkpoint()) is not None:
        with np.load(found) as saved:
            weights, bias = saved["weights"], saved["bias"]
        start = int(found.name[5:13]) + 1
    run = tracking.start_run() if tracking else None  # logs the job's hyperparameters as the run's params
    one_hot = np.eye(10)[train_y]
    done = {"epoch": start - 1}

    def save_on_stop() -> Path:  # SIGTERM (suspend, delete): the last whole epoch, at the next progress report
        state = {"weights": weights, "bias": bias, "mean": mean, "scale": scale, "classes": classes}
        return save_checkpoint(functools.partial(_save_npz, state=state), done["epoch"], suffix=".npz")

    on_stop(save_on_stop if is_chief() else None)
    for epoch in range(start, epochs):
        for _ in range(20):  # full-batch steps
            probabilities = softmax(train_x @ weights + bias)
            gradient = probabilities - one_hot
            weights -= learning_rate * train_x.T @ gradient / len(train_y)
            bias -= learning_rate * gradient.mean(axis=0)
        loss = float(-np.log(softmax(train_x @ weights + bias)[np.arange(len(train_y)), train_y] + 1e-12).mean())
        accuracy = float((np.argmax(test_x @ weights + bias, axis=1) == test_y).mean())
        done["epoch"] = epoch
        print(f"epoch {epoch}: loss {loss:.4f} test accuracy {accuracy:.3f}", flush=True)
        report_progress(epoch=epoch + 1, total_epochs=epochs, loss=loss, metrics={"accuracy": accuracy})
        if is_chief():
            state = {"weights": weights, "bias": bias, "mean": mean, "scale": scale, "classes": classes}
            path = save_checkpoint(functools.partial(_save_npz, state=state), epoch, suffix=".npz")
            if run is not None:
                run.log_metrics({"loss": loss, "accuracy": accuracy}, step=epoch)
                run.log_artifact(path)
    if is_chief():
        write_holdout(features[split:][:30], test_y[:30])
    if run is not None:
        run.finish("FINISHED")
    return 0


def write_holdout(instances: np.ndarray, labels: np.ndarray) -> None:
    """Held-out images and their labels beside the checkpoints (not a checkpoint name, so loaders skip it): what a
    client of the served model can check its predictions against (tests/integration/test_serving_handoff.py)."""
    holdout = {"instances": instances.tolist(), "labels": labels.tolist()}
    (checkpoint_dir() / "holdout.json").write_text(json.dumps(holdout))


def _save_npz(path: Path, state: dict[str, np.ndarray]) -> None:
    with path.open("wb") as handle:  # np.savez on a path would append .npz to the temporary name
        np.savez(handle, **state)


if __name__ == "__main__":
    sys.exit(main())
