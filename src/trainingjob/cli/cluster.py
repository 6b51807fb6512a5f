"""`tj cluster …`: the local control plane used by tests, demos and benchmarks."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trainingjob.cluster import control_plane
from trainingjob.cluster import status as cluster_status
from trainingjob.cluster.errors import ClusterError

name_option = click.option(
    "--name",
    default=control_plane.DEFAULT_NAME,
    envvar="TJ_CLUSTER",
    show_default=True,
    help="Cluster name; several clusters can run side by side (env TJ_CLUSTER, which `tj cluster env` exports).",
)


def fail(error: ClusterError) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(1)


def say(message: str) -> None:
    click.echo(message, err=True)


@click.group()
def cluster() -> None:
    """Run a real local Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and
    local process nodes whose pods really run."""


@cluster.command()
@name_option
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(1, 1000), help="Fake GPU nodes (kwok).")
@click.option(
    "--local-nodes",
    default=1,
    show_default=True,
    type=click.IntRange(0, 200),
    help="Local process nodes (tj-local-N): pods scheduled there really run, as processes of this machine.",
)
@click.option(
    "--images",
    "images_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Image -> local runtime mapping for local nodes (default: examples/images.yaml of this repository).",
)
@click.option(
    "--apiserver-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port of kube-apiserver on 127.0.0.1 (default: any free port).",
)
@click.option(
    "--gang-scheduling/--no-gang-scheduling",
    default=True,
    show_default=True,
    help="Kubernetes' native gang scheduling (alpha in 1.35): the Workload API (scheduling.k8s.io/v1alpha1) and "
    "kube-scheduler's GangScheduling plugin, through the GenericWorkload and GangScheduling feature gates.",
)
@click.option(
    "--local-node-gpus",
    default="auto",
    show_default=True,
    help="GPUs of each local process node: auto (this machine's NVIDIA GPUs through NVML, none without them), "
    "none, or fake:N (N labelled fake devices that go through the real allocation path; no CUDA).",
)
@click.option(
    "--with-kueue",
    is_flag=True,
    help="Also run Kueue (built from its pinned module on first use) with its CRDs, webhooks and visibility API; "
    "on a running cluster, starts Kueue if it does not run.",
)
@click.option(
    "--with-s3",
    is_flag=True,
    help="Also run an S3 server (SeaweedFS's S3 gateway, built from its pinned module on first use) for s3 "
    "checkpoints; `tj cluster s3-secret NAMESPACE` gives a namespace its credentials.",
)
def up(
    name: str,
    nodes: int,
    local_nodes: int,
    images_file: Path | None,
    apiserver_port: int | None,
    gang_scheduling: bool,
    local_node_gpus: str,
    with_kueue: bool,
    with_s3: bool,
) -> None:
    """Build components on first use, start the cluster and wait until it is ready (no-op if running; restarts
    node agents that stopped)."""
    try:
        state = control_plane.up(
            name,
            nodes=nodes,
            apiserver_port=apiserver_port,
            say=say,
            local_nodes=local_nodes,
            images_file=images_file,
            gang_scheduling=gang_scheduling,
            local_node_gpus=local_node_gpus,
        )
        if with_kueue:
            from trainingjob.cluster.kueue.run import ensure_running

            ensure_running(state, say)
        if with_s3:
            from trainingjob.cluster.s3.run import ensure_running as ensure_s3

            ensure_s3(state, say)
    except ClusterError as error:
        fail(error)
    say("use it with:")
    for line in cluster_status.environment_lines(state):
        click.echo(line)


@cluster.command()
@click.option(
    "--with-promtool", is_flag=True, help="Also build Prometheus: promtool and the server (alert-rule tests)."
)
@click.option("--with-helm", is_flag=True, help="Also build helm (lints, renders and installs the chart in tests).")
@click.option("--with-kueue", is_flag=True, help="Also build Kueue's manager and render its install manifests.")
@click.option("--with-s3", is_flag=True, help="Also build SeaweedFS's weed (the S3 server of --with-s3).")
def build(with_promtool: bool, with_helm: bool, with_kueue: bool, with_s3: bool) -> None:
    """Build (or find cached) every pinned component and print where the binaries are."""
    from trainingjob.cluster.build import ensure_binaries, ensure_helm, ensure_promtool, ensure_seaweedfs
    from trainingjob.cluster.kueue.build import ensure_kueue

    try:
        binaries = ensure_binaries(say)
        if with_kueue:  # right after the control plane: it reuses the control plane's compiled libraries
            binaries["kueue"] = ensure_kueue(say) / "kueue"
        if with_promtool:
            binaries["promtool"] = ensure_promtool(say)
        if with_helm:
            binaries["helm"] = ensure_helm(say)
        if with_s3:
            binaries["weed"] = ensure_seaweedfs(say)
    except ClusterError as error:
        fail(error)
    for name, path in binaries.items():
        click.echo(f"{name:<25}{path}")


@cluster.command("simulate-training")
@click.argument("job")
@click.option("--namespace", "-n", default="default", show_default=True)
@click.option("--epochs", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option("--seconds-per-epoch", default=2.0, show_default=True, type=click.FloatRange(0, 3600))
@click.option("--kubeconfig", default=None, envvar="KUBECONFIG", help="Kubeconfig of the local cluster.")
def simulate_training(job: str, namespace: str, epochs: int, seconds_per_epoch: float, kubeconfig: str | None) -> None:
    """Play worker 0 of JOB on the local cluster: report simulated epochs to the real progress endpoint with a
    real pod-bound token, then let kwok complete the workers. For demos; real workers use trainingjob.sdk."""
    import asyncio

    from trainingjob.cluster.simulate import simulate

    try:
        asyncio.run(simulate(namespace, job, epochs, seconds_per_epoch, kubeconfig, say=click.echo))
    except Exception as error:  # a demo helper: one clear line, not a traceback
        fail(ClusterError(f"simulated training of {namespace}/{job} failed: {error}"))


@cluster.command("operator")
@name_option
@click.option("--restart", is_flag=True, help="Stop a running operator first (new ports, a fresh 24 h token).")
@click.option("--stop", "stop_only", is_flag=True, help="Stop the cluster's operator and exit.")
@click.argument("operator_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- TJ OPERATOR OPTIONS...]")
def local_operator(name: str, restart: bool, stop_only: bool, operator_args: tuple[str, ...]) -> None:
    """Run the operator for this local cluster in the background, as its ServiceAccount, with the progress
    endpoint where workers on the local process nodes reach it; print its ports and log. Needs the CRDs and RBAC
    (kubectl apply -f deploy/crd/ -f deploy/rbac/). Options after -- go to `tj operator`, e.g.
    -- --gpu-type H100=accelerator=nvidia-gpu."""
    from trainingjob.cluster import local_operator as operators

    state = control_plane.ClusterState.load(name)
    if state is None:
        fail(ClusterError(f"no cluster {name!r}; start one with `tj cluster up`"))
    try:
        running = operators.is_running(state)
        if stop_only or (restart and running):
            stopped = operators.stop_operator(state)
            say(f"operator of cluster {name!r} {'stopped' if stopped else 'was not running'}")
            if stop_only:
                return
            running = False
        ports = operators.operator_ports(state)
        if running and ports is not None:
            say(f"the operator of cluster {name!r} is already running (--restart to start it again)")
        else:
            operators.stop_operator(state)  # a recorded operator that died: forget it
            ports = operators.start_operator(state, operator_args, say)
    except ClusterError as error:
        fail(error)
    for line in operators.describe(state, ports):
        click.echo(line)


@cluster.command("s3-secret")
@name_option
@click.argument("namespace")
@click.option("--secret", default="s3-credentials", show_default=True, help="Name of the Secret.")
def s3_secret(name: str, namespace: str, secret: str) -> None:
    """Create (or update) a Secret in NAMESPACE with the cluster's S3 credentials and endpoint (AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION), for a job's checkpoint.storage.secretName."""
    from trainingjob.cluster.s3.run import apply_secret

    state = control_plane.ClusterState.load(name)
    if state is None:
        fail(ClusterError(f"no cluster {name!r}; start one with `tj cluster up`"))
    try:
        apply_secret(state, namespace, secret)
    except ClusterError as error:
        fail(error)
    say(f"secret {namespace}/{secret} holds the S3 credentials of cluster {name!r}")


@cluster.command()
@name_option
def down(name: str) -> None:
    """Stop every process of the cluster and remove its state."""
    try:
        control_plane.down(name, say=say)
    except ClusterError as error:
        fail(error)


@cluster.command()
@name_option
def status(name: str) -> None:
    """Report each component: pid, process and health. Exit 1 unless all are healthy."""
    try:
        rows = cluster_status.status(name)
    except ClusterError as error:
        fail(error)
    width = max([10, *(len(row["version"]) + 1 for row in rows)])  # SeaweedFS's is a long pseudo-version
    click.echo(f"{'COMPONENT':<25}{'VERSION':<{width}}{'PID':<9}{'PROCESS':<10}HEALTH")
    for row in rows:
        click.echo(f"{row['component']:<25}{row['version']:<{width}}{row['pid']:<9}{row['process']:<10}{row['health']}")
    if any(row["health"] != "ok" for row in rows):
        sys.exit(1)


@cluster.command()
@name_option
def kubeconfig(name: str) -> None:
    """Print the path of the cluster's admin kubeconfig."""
    state = control_plane.ClusterState.load(name)
    if state is None:
        fail(ClusterError(f"no cluster {name!r}; start one with `tj cluster up`"))
    click.echo(str(state.kubeconfig))


@cluster.command()
@name_option
def env(name: str) -> None:
    """Print the `export` lines for KUBECONFIG and PATH (eval "$(tj cluster env)")."""
    state = control_plane.ClusterState.load(name)
    if state is None:
        fail(ClusterError(f"no cluster {name!r}; start one with `tj cluster up`"))
    for line in cluster_status.environment_lines(state):
        click.echo(line)


@cluster.group()
def runtimes() -> None:
    """Venvs that stand in for images on local process nodes (examples/images.yaml)."""


@runtimes.command("build")
@click.argument("images", nargs=-1)
@click.option(
    "--images-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Image mapping (default: examples/images.yaml of this repository).",
)
def runtimes_build(images: tuple[str, ...], images_file: Path | None) -> None:
    """Build the venv of each IMAGE (default: every mapped image) ahead of time, showing pip's output."""
    from trainingjob.node.images.catalog import DEFAULT_IMAGES_FILE, ImageCatalog, ImageError
    from trainingjob.node.images.runtimes import RuntimeBuildError, built_runtime, ensure_runtime

    catalog = ImageCatalog(images_file or DEFAULT_IMAGES_FILE)
    try:
        for image in images or catalog.names():
            spec = catalog.lookup(image)
            if built_runtime(spec) is not None:
                click.echo(f"{image}: ready ({built_runtime(spec).venv})")  # type: ignore[union-attr]
                continue
            say(f"{image}: building its runtime")
            runtime = ensure_runtime(spec, echo=lambda line: say(f"  {line}"))
            click.echo(f"{image}: ready ({runtime.venv})")
    except (ImageError, RuntimeBuildError) as error:
        fail(ClusterError(str(error)))
