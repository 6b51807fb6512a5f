"""MPI (Open MPI): a hostfile with `<host> slots=N` per worker, and the OMPI variables that point at it.

Without a launcher, worker 0 is expected to run `mpirun` (the user's command) and how it reaches the other workers
(ssh keys baked into the image, or a PMIx launcher) is the image's business.

With spec.roles.launcher, the operator makes it work: the launcher pod runs the user's command (mpirun ...), the
workers run the remote-start agent from the job's ConfigMap (trainingjob/sdk/mpi_agent.py, Python's standard library
only), and Open MPI's rsh launcher (`OMPI_MCA_plm_rsh_agent`) starts its daemons on the workers through that agent
instead of ssh: no sshd, no keys in the image. Every request carries an HMAC of a per-connection challenge made
with a key only this job's pods mount (the Secret `<job>-mpi-key`, one of this framework's children), so nothing
else can run commands in the workers. The hostfile lists the workers only: the launcher runs no ranks, and the
launcher's mpirun judges the job's success.

All of it lives here, behind the hooks of frameworks/base.py: the Secret (children), the key's volume and the
workers' agent command (pod_changes), the launcher's verdict (success_rule), and which rank failed it
(failure_detail): the launcher's log tail is its termination message (FallbackToLogsOnError), where mpirun's last
words name the rank (or the daemon's node) that ended the job, so a failed job says "rank 0 on <worker>" rather
than only "launcher 0 failed".
"""

from __future__ import annotations

import base64
import functools
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainingjob.frameworks.base import CONFIG_DIR, WORKER, Plugin, PodChanges, Role, SuccessRule, WorkerContext

LAUNCHER = "launcher"
# spec.roles.launcher, as the CRD schema describes it (api/schema_roles.py adds its limit).
LAUNCHER_ROLE = Role(
    LAUNCHER,
    "MPI's launcher: one pod that runs mpirun (command and args; spec.command when unset) and judges the job: it "
    "has Succeeded once the launcher exited 0. The workers then run the operator's remote-start agent instead "
    "of spec.command (python3 in the image is all it needs): Open MPI's rsh launcher starts its daemons on the "
    "workers through it (OMPI_MCA_plm_rsh_agent), authenticated with a key the operator generates per job in "
    "the Secret <job>-mpi-key, so no sshd and no ssh keys are needed. The hostfile lists the workers only.",
    single=True,
    order=-2,
)
HOSTFILE = "hostfile"
HOSTFILE_PATH = f"{CONFIG_DIR}/{HOSTFILE}"
AGENT_FILE = "mpi-agent.py"
AGENT_PATH = f"{CONFIG_DIR}/{AGENT_FILE}"
KEY_DIR = "/var/run/secrets/trainingjob/mpi"
KEY_FILE = "key"
KEY_BYTES = 32
KEY_VOLUME = "tj-mpi-key"
# mpirun's own words (Open MPI 4's help texts, help-orterun.txt, help-mpi-api.txt, help-errmgr-base.txt) for what
# ended the job, as they end the launcher's log. Only numbers and a host name are taken from them (the log is the
# user's: nothing else of it reaches status).
HOST = r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252})"
RANK_ENDINGS = (
    # The SDK's own line before it calls MPI_Abort (sdk/_mpi_abort.py): Open MPI 4.1 sometimes loses the abort's
    # help text (measured: 2 runs in 3 printed "ORTE_ERROR_LOG: Data unpack would read past end of buffer" instead).
    (
        re.compile(
            r"trainingjob\.sdk: rank (?P<rank>\d+) failed \((?P<kind>[A-Za-z_][A-Za-z0-9_.]{0,127})\); aborting"
        ),
        "MPI rank {rank} failed ({kind}) and aborted the MPI job",
    ),
    (
        re.compile(r"MPI_ABORT was invoked on rank (?P<rank>\d+) in communicator \S+\s+with errorcode (?P<code>-?\d+)"),
        "MPI rank {rank} called MPI_Abort (errorcode {code})",
    ),
    (
        re.compile(
            rf"noticed that process rank (?P<rank>\d+) with PID \d+ on node {HOST} exited on signal (?P<signal>\d+)"
        ),
        "MPI rank {rank} on {host} was killed by signal {signal}",
    ),
    (
        re.compile(
            r"The first process to do so was:\s+Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]"
            r"\s+Exit code:\s+(?P<code>-?\d+)"
        ),
        "MPI rank {rank} exited with code {code}",
    ),
    (
        re.compile(rf"due to process rank (?P<rank>\d+) with PID \d+ on\s+node {HOST} exiting improperly"),
        "MPI rank {rank} on {host} exited without MPI_Finalize",
    ),
    (
        re.compile(
            r"lost communication with a remote daemon\.\s+HNP daemon\s*:\s*\S+ on node \S+"
            rf"\s+Remote daemon\s*:\s*\S+ on node {HOST}"
        ),
        "mpirun lost its daemon on {host}",
    ),
)


def rank_failure(log_tail: str | None) -> str | None:
    """Which rank ended an MPI job, from mpirun's output (the launcher's log tail); None when the tail names none
    (mpirun's own failure, say). In RANK_ENDINGS' order: a rank's own MPI_Abort is the cause, where mpirun's
    verdict that follows it would name a rank it killed on the way."""
    for pattern, template in RANK_ENDINGS:
        match = pattern.search(log_tail or "")
        if match is not None:
            return template.format(**match.groupdict())
    return None


# What the workers of a launcher job run: the agent, serving the launcher's requests until the job ends.
AGENT_COMMAND = ("python3", AGENT_PATH, "serve")


@functools.cache
def agent_source() -> str:
    """The agent script shipped in the job's ConfigMap (one self-contained file of the SDK)."""
    return (Path(__file__).resolve().parent.parent / "sdk" / "mpi_agent.py").read_text()


def has_launcher(context: WorkerContext) -> bool:
    return bool(context.hosts_of(LAUNCHER))


def key_secret_name(job_name: str) -> str:
    """The Secret with the key the launcher's remote-start agent and the workers' agents share."""
    return f"{job_name}-mpi-key"


def key_secret(job_name: str, key: bytes | None = None) -> dict[str, Any]:
    """`<job>-mpi-key` with `key` (hex, as the agent reads it), a fresh random one unless given. Asked for whenever
    workers are created: the first create wins and AlreadyExists keeps that key, so the operator never needs to
    read (or watch) Secrets; owned by the job, garbage collection removes it with the job."""
    material = (key if key is not None else secrets.token_bytes(KEY_BYTES)).hex().encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": key_secret_name(job_name)},
        "type": "Opaque",
        "data": {KEY_FILE: base64.b64encode(material).decode()},
    }


class Mpi(Plugin):
    name = "mpi"
    roles = (LAUNCHER_ROLE,)

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        env = {
            "OMPI_MCA_orte_default_hostfile": HOSTFILE_PATH,
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_set_default_slots": str(context.processes_per_worker),
            "MPI_HOSTFILE": HOSTFILE_PATH,
        }
        if has_launcher(context):
            env.update(
                {
                    # mpirun (and orted, which spawns further daemons as a tree) start remote daemons with this.
                    "OMPI_MCA_plm_rsh_agent": f"python3 {AGENT_PATH}",
                    "TRAININGJOB_MPI_AGENT_PORT": str(context.port),
                    "TRAININGJOB_MPI_KEY_FILE": f"{KEY_DIR}/{KEY_FILE}",
                }
            )
        return env

    def config_files(self, context: WorkerContext) -> dict[str, str]:
        lines = [f"{host} slots={context.processes_per_worker}" for host in context.hosts]
        files = {HOSTFILE: "\n".join(lines) + "\n"}
        if has_launcher(context):
            files[AGENT_FILE] = agent_source()
        return files

    def children(self, context: WorkerContext) -> list[dict[str, Any]]:
        return [key_secret(context.job_name)] if has_launcher(context) else []

    def pod_changes(self, context: WorkerContext) -> PodChanges:
        """Every pod of a launcher job mounts the key; its workers run the agent instead of the user's command."""
        if not has_launcher(context):
            return PodChanges()
        volume = {"name": KEY_VOLUME, "secret": {"secretName": key_secret_name(context.job_name), "defaultMode": 0o444}}
        mount = {"name": KEY_VOLUME, "mountPath": KEY_DIR, "readOnly": True}
        if context.role == WORKER:
            return PodChanges(volumes=(volume,), mounts=(mount,), command=AGENT_COMMAND)
        # The launcher's log tail becomes its termination message: mpirun names the failed rank there.
        return PodChanges(volumes=(volume,), mounts=(mount,), termination_message_policy="FallbackToLogsOnError")

    def success_rule(self, replicas: Mapping[str, int]) -> SuccessRule | None:
        if replicas.get(LAUNCHER, 0) > 0:
            return SuccessRule(LAUNCHER, 0, "LauncherSucceeded", "launcher 0 (mpirun) succeeded")
        return None

    def failure_detail(self, role: str, message: str | None) -> str | None:
        return rank_failure(message) if role == LAUNCHER else None
