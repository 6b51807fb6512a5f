"""Names shared by the schema, the builders and the operator, so no string is spelled twice."""

from __future__ import annotations

GROUP = "ml.example.com"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainingJob"
PLURAL = "trainingjobs"
SINGULAR = "trainingjob"
SHORT_NAMES = ("tj",)
CRD_NAME = f"{PLURAL}.{GROUP}"

FRAMEWORKS = ("pytorch", "tensorflow", "xgboost", "jax", "mpi")
RESTART_POLICIES = ("OnFailure", "Never", "ExitCode")
BACKENDS = ("nccl", "gloo")
PHASES = ("Pending", "Running", "Restarting", "Succeeded", "Failed", "Suspended")
CLEAN_POD_POLICIES = ("All", "Running", "None")
SUCCESS_POLICIES = ("AllWorkers", "Rank0")
RESTART_STRATEGIES = ("Gang", "Worker")
FAILURE_ACTIONS = ("Restart", "Fail", "Ignore")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")

FINALIZER = f"{GROUP}/finalizer"
LABEL_JOB_NAME = f"{GROUP}/job-name"
LABEL_WORKER_INDEX = f"{GROUP}/worker-index"
LABEL_ROLE = f"{GROUP}/role"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "trainingjob-operator"
LABEL_SPEC_HASH = f"{GROUP}/spec-hash"
LABEL_ATTEMPT = f"{GROUP}/attempt"
CONFIG_MOUNT_PATH = "/etc/trainingjob"
SHM_MOUNT_PATH = "/dev/shm"
HYPERPARAMETERS_FILE = "hyperparameters.json"
HOSTFILE = "hostfile"
PROGRESS_CA_FILE = "progress-ca.crt"
PROGRESS_AUDIENCE = "trainingjob-progress"
PROGRESS_TOKEN_DIR = "/var/run/secrets/trainingjob/progress"

# Child names are `<job>-worker-<index>` (a pod hostname: DNS-1123 label, 63 characters), `<job>-workers`
# (a Service: DNS-1035 label), `<job>-config`, `<job>-hostfile`, `<job>-checkpoints`. With at most 1024 workers
# the longest suffix is "-worker-1023" (12 characters), so 63 - 12 = 51 characters keep every child valid.
MAX_JOB_NAME_LENGTH = 51
MAX_WORKERS = 1024
MAX_GPUS_PER_WORKER = 8
DEFAULT_MASTER_PORT = 29500
DEFAULT_CHECKPOINT_DIR = "/checkpoints"
DEFAULT_DATA_MOUNT_PATH = "/data"
GPU_RESOURCE = "nvidia.com/gpu"

# Environment variables the operator injects; users may not set them in spec.env (the schema rejects them).
RESERVED_ENV_NAMES = (
    # job identity and the generic distributed contract
    "TRAININGJOB_NAME",
    "TRAININGJOB_NAMESPACE",
    "TRAININGJOB_FRAMEWORK",
    "TRAININGJOB_WORKER_INDEX",
    "TRAININGJOB_RESTART_COUNT",
    "TRAININGJOB_HYPERPARAMETERS_FILE",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "NCCL_SOCKET_IFNAME",
    "MODEL",
    "DATASET",
    "CHECKPOINT_DIR",
    "CHECKPOINT_INTERVAL",
    "CHECKPOINT_KEEP_LAST",
    "RESUME_FROM_CHECKPOINT",
    "DATA_DIR",
    "DISTRIBUTED_BACKEND",
    # pytorch (torchrun)
    "PET_NNODES",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    # tensorflow
    "TF_CONFIG",
    # xgboost (rabit / collective tracker)
    "DMLC_TRACKER_URI",
    "DMLC_TRACKER_PORT",
    "DMLC_TASK_ID",
    "DMLC_NUM_WORKER",
    # jax
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
    # mpi
    "OMPI_MCA_orte_default_hostfile",
    "OMPI_MCA_plm_rsh_agent",
    "OMPI_ALLOW_RUN_AS_ROOT",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "MPI_HOSTFILE",
    "OMPI_MCA_orte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_set_default_slots",
)
# Whole families we own: every hyperparameter becomes HYPERPARAM_<KEY>, and TRAININGJOB_ is ours.
RESERVED_ENV_PREFIXES = ("HYPERPARAM_", "TRAININGJOB_")

# Volumes and mount paths the operator adds to every worker; user volumes may not reuse these names.
RESERVED_VOLUME_NAMES = ("dshm", "tj-config", "tj-hostfile", "data", "checkpoints", "tj-progress-token")
