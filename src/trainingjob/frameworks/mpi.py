"""MPI (Open MPI): a hostfile with `<host> slots=N` per worker, and the OMPI variables that point at it.

Worker 0 is expected to run `mpirun` (the user's command); the other workers only need to be reachable. How
mpirun reaches them (ssh keys baked into the image, or a PMIx launcher) is the image's business: the operator
provides names, slots and the hostfile.
"""

from __future__ import annotations

from trainingjob.api.constants import CONFIG_MOUNT_PATH, HOSTFILE
from trainingjob.frameworks.base import WorkerContext

HOSTFILE_PATH = f"{CONFIG_MOUNT_PATH}/{HOSTFILE}"


class Mpi:
    name = "mpi"

    def worker_env(self, context: WorkerContext) -> dict[str, str]:
        return {
            "OMPI_MCA_orte_default_hostfile": HOSTFILE_PATH,
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_set_default_slots": str(context.processes_per_worker),
            "MPI_HOSTFILE": HOSTFILE_PATH,
        }

    def config_files(self, context: WorkerContext) -> dict[str, str]:
        lines = [f"{host} slots={context.processes_per_worker}" for host in context.hosts]
        return {HOSTFILE: "\n".join(lines) + "\n"}
