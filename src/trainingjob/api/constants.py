"""Names shared by the schema, the builders and the operator, so no string is spelled twice.

What belongs to the frameworks (their names, roles, environment variables, the config directory) is taken from
frameworks/, so adding a framework does not touch this module.
"""

from __future__ import annotations

from trainingjob.api.status import Phase
from trainingjob.frameworks.base import CONFIG_DIR, WORKER
from trainingjob.frameworks.registry import FRAMEWORKS as PLUGINS
from trainingjob.frameworks.registry import framework_env_names

GROUP = "ml.example.com"
V1ALPHA1 = "v1alpha1"
V1 = "v1"
# Both are served; their order is the CRD's (and `kubectl explain`'s default is the storage version).
SERVED_VERSIONS = (V1ALPHA1, V1)
STORAGE_VERSION = V1
# The version the operator lists, watches and writes. It is the storage version, so reading it never needs the
# conversion webhook: the operator's own watch does not depend on the webhook it serves (docs/trainingjob.md).
WATCHED_VERSION = STORAGE_VERSION
WATCHED_API_VERSION = f"{GROUP}/{WATCHED_VERSION}"
# The shape api/types.py reads: api/conversion.py turns every served version into it, so the planner, the
# builders and the metrics see one shape whatever version a job was written or read in.
INTERNAL_VERSION = V1ALPHA1
# The version the examples, the lab and most tests write their manifests in.
VERSION = V1ALPHA1
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainingJob"
PLURAL = "trainingjobs"
SINGULAR = "trainingjob"
SHORT_NAMES = ("tj",)
CRD_NAME = f"{PLURAL}.{GROUP}"

# spec.framework: one module each under frameworks/, registered in frameworks/registry.py.
FRAMEWORKS = tuple(PLUGINS)
RESTART_POLICIES = ("OnFailure", "Never", "ExitCode")
BACKENDS = ("nccl", "gloo")
PHASES = tuple(phase.value for phase in Phase)
# v1's status.state: the guide's states plus Restarting (see api/conversion.py for how they map to phases).
STATES = ("Pending", "Initializing", "Running", "Restarting", "Completed", "Failed", "Suspended", "Queued")
CHECKPOINT_STORAGE_TYPES = ("pvc", "s3", "gcs")
CLEAN_POD_POLICIES = ("All", "Running", "None")
SUCCESS_POLICIES = ("AllWorkers", "Rank0")
RESTART_STRATEGIES = ("Gang", "Worker")
FAILURE_ACTIONS = ("Restart", "Fail", "Ignore")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
GANG_PROVIDERS = ("Auto", "Native", "Coscheduling", "Volcano", "Disabled")
# The roles other than worker (spec.roles), each one framework's and described by it (frameworks/base.py: Role),
# in the registry's order (the CRD schema's).
EXTRA_ROLES = tuple(role for plugin in PLUGINS.values() for role in plugin.roles)
# Roles of a job's pods, in the order they are created and listed: each role's `order` around the workers' 0.
ROLES = tuple(
    name for _, name in sorted([(0, WORKER), *((role.order, role.name) for role in EXTRA_ROLES)], key=lambda r: r[0])
)
FRAMEWORK_ROLES = {role.name: plugin.name for plugin in PLUGINS.values() for role in plugin.roles}
# At most one pod of these roles (TensorFlow's chief and evaluator, MPI's launcher).
SINGLE_ROLES = tuple(role.name for role in EXTRA_ROLES if role.single)
# The roles that are the job's chief when it has them (TensorFlow's chief); else worker 0 is (api/replicas.py).
CHIEF_ROLES = tuple(role.name for role in EXTRA_ROLES if role.chief)

FINALIZER = f"{GROUP}/finalizer"
# The container of a worker pod that runs the training (builders/pod.py); `tj logs` and the UI read its log.
TRAINER_CONTAINER = "trainer"
# The mutating webhook's proof that a job's author may run its pods (reconcile/admission.py).
ADMISSION_ANNOTATION = f"{GROUP}/admission"
LABEL_JOB_NAME = f"{GROUP}/job-name"
LABEL_WORKER_INDEX = f"{GROUP}/worker-index"
LABEL_ROLE = f"{GROUP}/role"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "trainingjob-operator"
# spec.managedBy (the convention of Job, JobSet and Kubeflow's jobs, KEP-4368): absent or this value, the operator
# reconciles the job; any other value names the controller that does, e.g. MultiKueue's on a manager cluster.
CONTROLLER_NAME = f"{GROUP}/trainingjob-operator"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
LABEL_SPEC_HASH = f"{GROUP}/spec-hash"
LABEL_ATTEMPT = f"{GROUP}/attempt"
# The gang a worker belongs to (scheduling/gang.py), whichever scheduler's gang API declares it.
LABEL_GANG = f"{GROUP}/gang"
# Seed 001's (the Go lab's) worker label, value the job's name, on every pod a job runs: its checks
# `kubectl get pods -l trainingjob.ml.example.com/worker` and `kubectl logs -l …` find the workers as written.
LAB_LABEL_PREFIX = f"trainingjob.{GROUP}/"
# Metric names (comma-separated) whose value per epoch a job keeps in status.progress.history (progress/history.py).
ANNOTATION_METRIC_HISTORY = f"{GROUP}/metric-history"
HISTORY_METRICS = 4  # at most this many names; status.progress.history's maxProperties
HISTORY_POINTS = 128  # at most this many epochs each; its arrays' maxItems
LABEL_LAB_WORKER = f"{LAB_LABEL_PREFIX}worker"
CONFIG_MOUNT_PATH = CONFIG_DIR
SHM_MOUNT_PATH = "/dev/shm"
HYPERPARAMETERS_FILE = "hyperparameters.json"
PROGRESS_CA_FILE = "progress-ca.crt"
PROGRESS_AUDIENCE = "trainingjob-progress"
PROGRESS_TOKEN_DIR = "/var/run/secrets/trainingjob/progress"

# Child names are `<job>-<role>-<index>` (a pod hostname: DNS-1123 label, 63 characters), `<job>-workers`
# (a Service: DNS-1035 label), `<job>-config`, `<job>-mpi-key`, `<job>-checkpoints`. With at most 1024 workers or
# parameter servers the longest suffixes are "-worker-1023" and "-evaluator-0" (12 characters), so 63 - 12 = 51
# characters keep every child valid.
MAX_JOB_NAME_LENGTH = 51
MAX_WORKERS = 1024
MAX_GPUS_PER_WORKER = 8
DEFAULT_MASTER_PORT = 29500
DEFAULT_CHECKPOINT_DIR = "/checkpoints"
DEFAULT_GRACE_PERIOD_SECONDS = 30  # a pod's default terminationGracePeriodSeconds
MAX_GRACE_PERIOD_SECONDS = 86400
# The local cluster's kwok stages (cluster/stages/pod-running.yaml) give the containers they play this imageID:
# such a pod runs no code, and a job whose workers ran there is labelled simulated (status.simulated).
SIMULATED_IMAGE_ID_PREFIX = "sim://"
RECENT_PROGRESS_POINTS = 6  # status.progress.recent: the points the ETA's pace is measured over
DEFAULT_DATA_MOUNT_PATH = "/data"
# The image v1 jobs without spec.image get, from their spec.model (the guide's pattern; tj operator --default-image).
DEFAULT_IMAGE_PATTERN = "training-image:{model}"
GPU_RESOURCE = "nvidia.com/gpu"

# Environment variables the operator injects; users may not set them in spec.env (the schema rejects them).
# What builders/env.identity_env may set outside the reserved prefixes (a unit test holds it to exactly that);
# the frameworks' own names are derived from their code (RESERVED_ENV_NAMES below).
IDENTITY_ENV_NAMES = (
    "MODEL",
    "DATASET",
    "CHECKPOINT_DIR",
    "CHECKPOINT_INTERVAL",
    "CHECKPOINT_KEEP_LAST",
    "CHECKPOINT_URI",
    "RESUME_FROM_CHECKPOINT",
    "DATA_DIR",
    "DISTRIBUTED_BACKEND",
    # Seed 002's names (builders/env.py guide_env, downward_env).
    "NUM_WORKERS",
    "GPUS_PER_WORKER",
    "CHECKPOINT_FREQUENCY",
    "POD_NAME",
    "POD_IP",
)
# Injected by the operator, so spec.env may not set them (the CRD's CEL rule lists them; prefixes come on top).
RESERVED_ENV_NAMES: tuple[str, ...] = (*IDENTITY_ENV_NAMES, *framework_env_names())
# Whole families we own: every hyperparameter becomes HYPERPARAM_<KEY>, and TRAININGJOB_ is ours.
RESERVED_ENV_PREFIXES = ("HYPERPARAM_", "TRAININGJOB_")

# Volumes and mount paths the operator adds to every worker; user volumes may not reuse these names.
RESERVED_VOLUME_NAMES = ("dshm", "tj-config", "tj-hostfile", "data", "checkpoints", "tj-progress-token", "tj-mpi-key")

# Runtimes (docs/runtimes.md): what an admin gives every job that names one in spec.runtimeRef, cluster-wide or in
# one namespace; served in ml.example.com/v1 only.
RUNTIME_VERSION = V1
RUNTIME_API_VERSION = f"{GROUP}/{RUNTIME_VERSION}"
CLUSTER_RUNTIME_KIND = "ClusterTrainingRuntime"
CLUSTER_RUNTIME_PLURAL = "clustertrainingruntimes"
NAMESPACED_RUNTIME_KIND = "TrainingRuntime"
NAMESPACED_RUNTIME_PLURAL = "trainingruntimes"
RUNTIME_KINDS = (CLUSTER_RUNTIME_KIND, NAMESPACED_RUNTIME_KIND)

# LLMModel (docs/serving.md): a served model, its own API group, reconciled by the same operator.
MODEL_GROUP = "ai.example.com"
MODEL_VERSION = "v1"
MODEL_API_VERSION = f"{MODEL_GROUP}/{MODEL_VERSION}"
MODEL_KIND = "LLMModel"
MODEL_PLURAL = "llmmodels"
MODEL_SINGULAR = "llmmodel"
MODEL_SHORT_NAMES = ("llm",)
MODEL_CRD_NAME = f"{MODEL_PLURAL}.{MODEL_GROUP}"
# Deployment, Service and HorizontalPodAutoscaler of a model are all named after it (a DNS-1035 label: the Service).
MAX_MODEL_NAME_LENGTH = 50
LABEL_MODEL = f"{MODEL_GROUP}/llmmodel"
DEFAULT_SERVING_PORT = 8080
DEFAULT_SERVING_IMAGE = "registry.example/trainingjob-serving/model-server:0.1"
# Where a serving pod finds the model a TrainingJob or a claim holds (spec.source), read-only.
MODEL_MOUNT_PATH = "/model"

# TrainingSweep (docs/sweeps.md): a hyperparameter search whose trials are TrainingJobs it owns.
SWEEP_VERSION = V1
SWEEP_API_VERSION = f"{GROUP}/{SWEEP_VERSION}"
SWEEP_KIND = "TrainingSweep"
SWEEP_PLURAL = "trainingsweeps"
SWEEP_SINGULAR = "trainingsweep"
SWEEP_SHORT_NAMES = ("tsw", "sweep")
SWEEP_CRD_NAME = f"{SWEEP_PLURAL}.{GROUP}"
SWEEP_ALGORITHMS = ("random", "grid", "tpe", "cmaes")
SWEEP_PRUNERS = ("none", "median", "successiveHalving", "hyperband")
SWEEP_PARAMETER_TYPES = ("float", "int", "categorical")
SWEEP_DIRECTIONS = ("maximize", "minimize")
MAX_SWEEP_TRIALS = 1000
MAX_SWEEP_PARAMETERS = 16
MAX_CATEGORICAL_VALUES = 64
# Trials are named <sweep>-trial-<index>, index < MAX_SWEEP_TRIALS: the suffix takes at most 10 characters.
TRIAL_SUFFIX = "-trial-"
MAX_SWEEP_NAME_LENGTH = MAX_JOB_NAME_LENGTH - len(TRIAL_SUFFIX) - len(str(MAX_SWEEP_TRIALS - 1))
LABEL_SWEEP = f"{GROUP}/sweep"
LABEL_TRIAL_INDEX = f"{GROUP}/trial-index"
# Set by the sweep controller on a trial it stopped: Pruned (early stopping) or Stopped (the sweep ended first).
ANNOTATION_TRIAL_STOPPED = f"{GROUP}/trial-stopped"
# The Optuna sampler's attributes of the trial at its creation (JSON), so a restarted controller's study has them.
ANNOTATION_SAMPLER_STATE = f"{GROUP}/sampler-state"
# The queue a sweep's trials are admitted through: copied from the sweep to each trial.
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
