"""`tj cluster up|down|status`: bring a whole local control plane up in order, and take it down by pid."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from trainingjob.cluster import components as c
from trainingjob.cluster import localnodes, webhook_client
from trainingjob.cluster.build import ensure_binaries, pinned_versions
from trainingjob.cluster.errors import ClusterError
from trainingjob.cluster.kubeconfig import write_kubeconfig
from trainingjob.cluster.manifests import bootstrap_objects
from trainingjob.cluster.paths import cluster_dir
from trainingjob.cluster.pki import create_cluster_pki
from trainingjob.cluster.process import free_port, is_running, port_in_use, probe, start, stop, wait_healthy
from trainingjob.node.cleanup import remove_node_state
from trainingjob.node.config import NodeConfig
from trainingjob.node.devices.gpus import GpuModeError
from trainingjob.node.devices.gpus import parse_mode as parse_gpu_mode
from trainingjob.node.images.catalog import DEFAULT_IMAGES_FILE
from trainingjob.node.network.iproute import NetworkError, allocate_network, delete_bridge
from trainingjob.node.network.netplan import PodNetwork

DEFAULT_NAME = "default"
# Start order; stop runs it backwards so etcd outlives its clients.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
STARTUP_TIMEOUT = {
    "etcd": 30,
    "kube-apiserver": 90,
    "kube-controller-manager": 60,
    "kube-scheduler": 60,
    "kwok": 60,
}
CLIENT_USERS = ("admin", "kube-controller-manager", "kube-scheduler", "kwok")
# The addon `tj cluster operator` starts (cluster/local_operator.py): `status` shows it, `down` stops it.
OPERATOR = "operator"


@dataclass
class ClusterState:
    """What `up` records in state.json so `down`/`status` (another process, later) can find everything."""

    name: str
    root: Path
    ports: dict[str, int]
    binaries: dict[str, str]
    pids: dict[str, int]
    nodes: int
    versions: dict[str, str]
    local_nodes: int = 0
    network: dict[str, str] | None = None
    images_file: str | None = None
    # Native gang scheduling (Workload API + GangScheduling plugin) enabled in the API server and scheduler.
    gang_scheduling: bool = True
    # GPUs of the local process nodes: auto (the machine's, through NVML), none, or fake:N (labelled fake devices).
    local_node_gpus: str = "auto"
    # Optional components started on the running cluster (Kueue: cluster/kueue/run.py): name -> health URL.
    addons: dict[str, str] = field(default_factory=dict)

    @property
    def layout(self) -> c.Layout:
        return c.Layout(self.root, self.ports)

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig("admin")

    @property
    def pod_network(self) -> PodNetwork | None:
        return PodNetwork.from_dict(self.network) if self.network else None

    @property
    def agents(self) -> list[str]:
        """Node agents, one per local process node, named after their nodes."""
        return localnodes.node_names(self.local_nodes)

    def save(self) -> None:
        data = {k: v for k, v in self.__dict__.items() if k != "root"}
        (self.root / "state.json").write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, name: str) -> ClusterState | None:
        path = cluster_dir(name) / "state.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls(root=path.parent, **data)


def command_marker(state: ClusterState, name: str) -> str | None:
    """What only this component's command line holds, beside its binary: a node agent's config path, the local
    operator's Lease identity (agents and the operator run on sys.executable, like the tests)."""
    if name == OPERATOR:
        return f"tj-cluster-{state.name}-operator"
    return str(localnodes.config_path(state.name, name)) if name in state.agents else None


def component_running(state: ClusterState, name: str) -> bool:
    pid = state.pids.get(name)
    return pid is not None and is_running(pid, state.binaries[name], command_marker(state, name))


def is_up(state: ClusterState) -> bool:
    """Every process alive and the API server ready."""
    if not all(component_running(state, name) for name in COMPONENTS):
        return False
    check = c.health_checks(state.layout)["kube-apiserver"]
    return probe(check, state.layout.pki / "ca.crt")[0]


def allocate_ports(apiserver_port: int | None) -> dict[str, int]:
    if apiserver_port is not None and port_in_use(apiserver_port):
        raise ClusterError(
            f"port {apiserver_port} on 127.0.0.1 is already in use; choose another --apiserver-port "
            "or stop what listens there"
        )
    ports = {name: free_port() for name in ("etcd", "etcd-peer", *COMPONENTS[2:])}
    ports["kube-apiserver"] = apiserver_port or free_port()
    return ports


def stage_documents() -> list[str]:
    """Our kwok Stage files, shipped inside the package (docs/local-cluster.md explains each)."""
    stage_dir = resources.files("trainingjob.cluster") / "stages"
    return [
        entry.read_text() for entry in sorted(stage_dir.iterdir(), key=lambda e: e.name) if entry.name.endswith(".yaml")
    ]


def write_configuration(state: ClusterState) -> None:
    layout = state.layout
    network = state.pod_network
    nodes = tuple((n, localnodes.node_address(network, i)) for i, n in enumerate(state.agents))
    gateway = (network.gateway,) if network else ()
    create_cluster_pki(layout.pki, state.name, c.KUBERNETES_SERVICE_IP, gateway, nodes)
    for user in CLIENT_USERS:
        write_kubeconfig(layout.kubeconfig(user), f"tj-{state.name}", layout.apiserver_url, layout.pki, user)
    for index, node in enumerate(state.agents):
        write_kubeconfig(layout.kubeconfig(node), f"tj-{state.name}", layout.apiserver_url, layout.pki, f"node-{node}")
        config = localnodes.node_config(
            node,
            index,
            state.name,
            layout,
            network,
            state.images_file or "",
            state.versions.get("kubernetes", ""),
            state.local_node_gpus,
        )
        config.save()
    kubeconfig = layout.root / webhook_client.KUBECONFIG_FILE
    kubeconfig.write_text(yaml.safe_dump(webhook_client.webhook_kubeconfig(layout.pki)))
    admission = webhook_client.admission_configuration(kubeconfig)
    (layout.root / webhook_client.ADMISSION_FILE).write_text(yaml.safe_dump(admission))
    (layout.root / "kube-scheduler.yaml").write_text(c.scheduler_config(layout))
    (layout.root / "kwok.yaml").write_text(c.kwok_config(layout, stage_documents()))


def component_command(name: str, state: ClusterState, audit_policy: Path | None) -> list[str]:
    binary = Path(state.binaries[name])
    layout = state.layout
    builders = {
        "etcd": lambda: c.etcd_command(binary, layout),
        "kube-apiserver": lambda: c.apiserver_command(
            binary,
            layout,
            audit_policy,
            "0.0.0.0" if state.network else "127.0.0.1",
            state.gang_scheduling,
            admission if (admission := layout.root / webhook_client.ADMISSION_FILE).exists() else None,
        ),
        "kube-controller-manager": lambda: c.controller_manager_command(binary, layout),
        "kube-scheduler": lambda: c.scheduler_command(binary, layout, state.gang_scheduling),
        "kwok": lambda: c.kwok_command(binary, layout),
    }
    return builders[name]()


def start_components(state: ClusterState, audit_policy: Path | None, say: Callable[[str], None]) -> None:
    """etcd, then the API server, then the rest together (they only need the API server)."""
    layout = state.layout
    checks = c.health_checks(layout)
    for group in (("etcd",), ("kube-apiserver",), COMPONENTS[2:]):
        for name in group:
            log_path = layout.logs / f"{name}.log"
            state.pids[name] = start(name, component_command(name, state, audit_policy), log_path, layout.root)
            state.save()
        for name in group:
            wait_healthy(
                name,
                state.pids[name],
                state.binaries[name],
                checks[name],
                layout.pki / "ca.crt",
                layout.logs / f"{name}.log",
                STARTUP_TIMEOUT[name],
            )
            say(f"  {name} ready")


def kubectl(state: ClusterState, *args: str, input_text: str | None = None, timeout: float = 120) -> str:
    command = [state.binaries["kubectl"], f"--kubeconfig={state.kubeconfig}", *args]
    try:
        result = subprocess.run(command, input=input_text, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise ClusterError(f"kubectl {' '.join(args)} did not finish within {timeout:.0f}s") from error
    if result.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def bootstrap(state: ClusterState, say: Callable[[str], None]) -> None:
    """Fake nodes and the default StorageClass; return once nodes are Ready and pods can be admitted."""
    documents = "\n---\n".join(yaml.safe_dump(o) for o in bootstrap_objects(state.nodes))
    kubectl(state, "apply", "-f", "-", input_text=documents)
    kubectl(state, "wait", "--for=condition=Ready", "node", "-l", "type=kwok", "--timeout=90s")
    say(f"  {state.nodes} fake nodes Ready")
    wait_for(lambda: _has_default_service_account(state), 60, "the default ServiceAccount to be created")


def _has_default_service_account(state: ClusterState) -> bool:
    try:
        kubectl(state, "get", "serviceaccount", "default", "-n", "default", "-o", "name")
    except ClusterError:
        return False
    return True


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")


def start_node_agents(state: ClusterState, names: list[str], say: Callable[[str], None]) -> None:
    """Start (or restart) node agents, wait for their endpoints, then for their Nodes to be Ready."""
    if not names:
        return
    layout = state.layout
    for name in names:
        state.binaries[name] = sys.executable
        log_path = layout.logs / f"{name}.log"
        state.pids[name] = start(name, localnodes.agent_command(state.name, name), log_path, layout.root)
        state.save()
    for name in names:
        config = NodeConfig.load(localnodes.config_path(state.name, name))
        check = localnodes.health_check(config, layout)
        log_path = layout.logs / f"{name}.log"
        wait_healthy(name, state.pids[name], sys.executable, check, layout.pki / "ca.crt", log_path, 60)
    kubectl(state, "wait", "--for=condition=Ready", "node", *names, "--timeout=90s")
    say(f"  {len(names)} local process node{'s' if len(names) > 1 else ''} Ready ({', '.join(names)})")


def _restart_dead_agents(state: ClusterState, say: Callable[[str], None]) -> None:
    """Restarted agents adopt the pods their predecessors left running (nothing else of the cluster changes)."""
    dead = [name for name in state.agents if not component_running(state, name)]
    if dead:
        say(f"restarting stopped node agent(s) of cluster {state.name!r}: {', '.join(dead)}")
        start_node_agents(state, dead, say)


def up(
    name: str = DEFAULT_NAME,
    nodes: int = 4,
    apiserver_port: int | None = None,
    audit_policy: Path | None = None,
    say: Callable[[str], None] = print,
    local_nodes: int = 1,
    images_file: Path | None = None,
    gang_scheduling: bool = True,
    local_node_gpus: str = "auto",
) -> ClusterState:
    """Start a cluster, or return the running one unchanged (idempotent; node agents that stopped are restarted);
    clean up stale state first. `gang_scheduling`: enable Kubernetes' native gang scheduling (alpha in 1.35).
    `local_node_gpus`: what GPUs each local process node offers (auto, none, fake:N)."""
    try:
        parse_gpu_mode(local_node_gpus)
    except GpuModeError as error:
        raise ClusterError(str(error)) from None
    existing = ClusterState.load(name)
    if existing is not None and is_up(existing):
        _restart_dead_agents(existing, say)
        say(f"cluster {name!r} is already running")
        return existing
    if existing is not None or cluster_dir(name).exists():
        say(f"cleaning up stale state of cluster {name!r}")
        down(name, say=lambda _: None)
    binaries = {k: str(v) for k, v in ensure_binaries(say).items()}
    root = cluster_dir(name)
    root.mkdir(parents=True)
    try:
        network = allocate_network(str(root), local_nodes) if local_nodes and localnodes.can_isolate() else None
    except NetworkError as error:
        shutil.rmtree(root, ignore_errors=True)
        raise ClusterError(f"cannot create the pod network of the local nodes: {error}") from error
    ports = allocate_ports(apiserver_port)
    if network is None:
        ports.update({agent: free_port() for agent in localnodes.node_names(local_nodes)})
        ports.update({localnodes.gpu_metrics_port_name(a): free_port() for a in localnodes.node_names(local_nodes)})
    state = ClusterState(name, root, ports, binaries, {}, nodes, pinned_versions(), local_nodes)
    state.gang_scheduling = gang_scheduling
    state.local_node_gpus = local_node_gpus
    state.network = network.to_dict() if network else None
    state.images_file = str((images_file or DEFAULT_IMAGES_FILE).resolve())
    write_configuration(state)
    state.save()
    started = time.monotonic()
    say(f"starting cluster {name!r} ({', '.join(f'{k} {v}' for k, v in state.versions.items())})")
    try:
        start_components(state, audit_policy, say)
        bootstrap(state, say)
        start_node_agents(state, state.agents, say)
    except BaseException:
        stop_components(state)
        raise
    say(f"cluster {name!r} is up in {time.monotonic() - started:.1f}s")
    return state


def stop_node_agents(state: ClusterState) -> None:
    """Stop the agents, then kill every pod process they ran and remove the pods' namespaces and the bridge."""
    for name in state.agents:
        pid = state.pids.get(name)
        if pid is not None:
            stop(pid, state.binaries.get(name), marker=command_marker(state, name))
    nodes_dir = state.root / "nodes"
    if nodes_dir.is_dir():
        for node_dir in nodes_dir.iterdir():
            remove_node_state(node_dir)
    network = state.pod_network
    if network is not None:
        delete_bridge(network)


def stop_components(state: ClusterState) -> None:
    for name in state.addons:
        pid = state.pids.get(name)
        if pid is not None:
            stop(pid, state.binaries.get(name), marker=command_marker(state, name))
    stop_node_agents(state)
    for name in reversed(COMPONENTS):
        pid = state.pids.get(name)
        if pid is not None:
            stop(pid, state.binaries.get(name))


def down(name: str = DEFAULT_NAME, say: Callable[[str], None] = print) -> bool:
    """Stop every process the cluster started (by pid) and remove its state. False if there was none."""
    state = ClusterState.load(name)
    root = cluster_dir(name)
    if state is None and not root.exists():
        say(f"no cluster {name!r}")
        return False
    if state is not None:
        stop_components(state)
    shutil.rmtree(root, ignore_errors=True)
    say(f"cluster {name!r} removed")
    return True
