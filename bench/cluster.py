"""A fresh local control plane per run, sized for scale, with the contenders' requests audited."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.client import Api
from bench.measure import audit_policy
from trainingjob.cluster import control_plane
from trainingjob.cluster.control_plane import ClusterState

REPO = Path(__file__).resolve().parents[1]
CLUSTER_NAME = os.environ.get("TJ_BENCH_CLUSTER", "bench")
NAMESPACE = "bench"
START_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> float:
    """Poll until `condition` holds; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


@dataclass
class BenchCluster:
    state: ClusterState
    admin: Api

    @classmethod
    def up(
        cls, nodes: int, audited_users: list[str], say: Callable[[str], None], gang_scheduling: bool = False
    ) -> BenchCluster:
        """Always a new cluster: leftovers of a previous run (cache, etcd size, GC backlog) must not skew this one.
        Native gang scheduling is off unless asked for (bench/gang.py): the other scenarios compare contenders
        that place pods one by one, as they did before `tj cluster up` turned it on."""
        control_plane.down(CLUSTER_NAME, say=lambda _: None)
        policy = control_plane.cluster_dir(CLUSTER_NAME).with_name(f"{CLUSTER_NAME}-audit-policy.yaml")
        policy.parent.mkdir(parents=True, exist_ok=True)
        policy.write_text(audit_policy(audited_users))
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                state = control_plane.up(
                    CLUSTER_NAME,
                    nodes=nodes,
                    audit_policy=policy,
                    say=say,
                    local_nodes=0,
                    gang_scheduling=gang_scheduling,
                )
                break
            except control_plane.ClusterError as error:
                # Seen once between back-to-back runs: etcd exiting at startup. A benchmark must not lose an hour
                # to it; the error is reported, the next attempt starts from scratch.
                say(f"cluster start {attempt}/{START_ATTEMPTS} failed: {error}")
                control_plane.down(CLUSTER_NAME, say=lambda _: None)
                if attempt == START_ATTEMPTS:
                    raise
        return cls(state, Api.from_kubeconfig(str(state.kubeconfig)))

    async def down(self) -> None:
        await self.admin.close()
        control_plane.down(CLUSTER_NAME, say=lambda _: None)

    @property
    def audit_log(self) -> Path:
        return self.state.layout.logs / "audit.log"

    @property
    def apiserver_log(self) -> Path:
        return self.state.layout.logs / "kube-apiserver.log"

    def component_pids(self) -> dict[str, int]:
        return dict(self.state.pids)

    def kubectl(self, *args: str, input_text: str | None = None) -> str:
        return control_plane.kubectl(self.state, *args, input_text=input_text)

    def wait_established(self, crd: str) -> None:
        """`kubectl wait` fails outright while a new CRD has no conditions yet, so poll it."""

        def established() -> bool:
            try:
                self.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=10s")
            except control_plane.ClusterError:
                return False
            return True

        wait_for(established, 60, f"CRD {crd} to be Established")

    def service_account_kubeconfig(self, namespace: str, account: str) -> Path:
        """A kubeconfig with a TokenRequest token, so a contender is authenticated (and audited) as its account."""
        wait_for(lambda: self._has_account(namespace, account), 30, f"ServiceAccount {namespace}/{account}")
        token = self.kubectl("create", "token", account, "-n", namespace, "--duration=6h").strip()
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.state.layout.apiserver_url,
                        "certificate-authority": str(self.state.layout.pki / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": account, "user": {"token": token}}],
            "contexts": [{"name": "bench", "context": {"cluster": "local", "user": account}}],
            "current-context": "bench",
        }
        path = self.state.root / f"{namespace}-{account}.kubeconfig"
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path

    def _has_account(self, namespace: str, account: str) -> bool:
        try:
            self.kubectl("get", "serviceaccount", account, "-n", namespace, "-o", "name")
        except control_plane.ClusterError:
            return False
        return True
