"""Build the pinned upstream components with the machine's Go toolchain, once per version.

Why: no prebuilt Kubernetes binary can be downloaded here, but the Go module proxy works. Our wrapper modules under
tools/ pin exact versions (their go.sum makes the build reproducible); binaries go to a per-version cache directory
outside the repo, so the second `tj cluster up` starts in seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trainingjob.cluster.errors import ClusterError, log_tail
from trainingjob.cluster.paths import binaries_dir, tools_dir
from trainingjob.paths import cache_root


@dataclass(frozen=True)
class ComponentSet:
    """One wrapper module and the binaries it builds (output name -> Go package path)."""

    name: str
    module: str
    packages: dict[str, str]

    @property
    def wrapper_dir(self) -> Path:
        return tools_dir() / self.name

    @property
    def version(self) -> str:
        return required_version(self.wrapper_dir / "go.mod", self.module)

    def ldflags(self) -> str:
        """Strip symbols (smaller, faster links) and stamp Kubernetes versions so `kubectl version` tells the truth."""
        flags = ["-s", "-w"]
        if self.name == "kubernetes":
            major, minor = self.version.lstrip("v").split(".")[:2]
            for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
                flags += [
                    f"-X {pkg}.gitVersion={self.version}",
                    f"-X {pkg}.gitMajor={major}",
                    f"-X {pkg}.gitMinor={minor}",
                    f"-X {pkg}.gitTreeState=clean",
                ]
        if self.name == "helm":
            # As helm's own Makefile stamps a release: its version, and the Kubernetes version `helm template`
            # and `helm lint` assume (1.<client-go minor>) instead of the v1.20 built into the source.
            flags.append(f"-X helm.sh/helm/v3/internal/version.version={self.version}")
            minor = required_version(self.wrapper_dir / "go.mod", "k8s.io/client-go").split(".")[1]
            for pkg in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
                flags += [f"-X {pkg}.k8sVersionMajor=1", f"-X {pkg}.k8sVersionMinor={minor}"]
        if self.name == "kueue":
            flags.append(f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={self.version}")  # as Kueue's Makefile does
        return " ".join(flags)


COMPONENT_SETS: tuple[ComponentSet, ...] = (
    ComponentSet("etcd", "go.etcd.io/etcd/server/v3", {"etcd": "go.etcd.io/etcd/server/v3"}),
    ComponentSet(
        "kubernetes",
        "k8s.io/kubernetes",
        {
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        },
    ),
    ComponentSet("kwok", "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
)

# Not a control-plane component (ensure_binaries never builds it): promtool checks deploy/monitoring/'s rules, and
# the Prometheus server scrapes a running operator in tests so the alert rules are evaluated on real series.
PROMETHEUS = ComponentSet(
    "prometheus",
    "github.com/prometheus/prometheus",
    {
        "promtool": "github.com/prometheus/prometheus/cmd/promtool",
        "prometheus": "github.com/prometheus/prometheus/cmd/prometheus",
    },
)

# Not a control-plane component either: helm lints, renders and installs charts/trainingjob-operator in tests.
HELM = ComponentSet("helm", "helm.sh/helm/v3", {"helm": "helm.sh/helm/v3/cmd/helm"})

# Not a control-plane component either: Kueue's manager, for `tj cluster up --with-kueue` (cluster/kueue/).
KUEUE = ComponentSet("kueue", "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"})

# Not a control-plane component either: SeaweedFS's `weed`, whose S3 gateway is `tj cluster up --with-s3` (cluster/s3/).
SEAWEEDFS = ComponentSet("seaweedfs", "github.com/seaweedfs/seaweedfs", {"weed": "github.com/seaweedfs/seaweedfs/weed"})

COMPLETE_MARKER = ".complete"


def required_version(go_mod: Path, module: str) -> str:
    """The version a wrapper go.mod pins for `module` (the one place versions are written down)."""
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    if not match:
        raise ClusterError(f"{go_mod} does not require {module}")
    return match.group(1)


def minimum_go_version(go_mod: Path) -> tuple[int, ...]:
    match = re.search(r"^go\s+(\d+(?:\.\d+)*)", go_mod.read_text(), re.MULTILINE)
    return parse_go_version(match.group(1)) if match else (1, 0)


def parse_go_version(text: str) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", text.removeprefix("go"))
    return tuple(int(n) for n in numbers[:3])


def check_go_toolchain(required: tuple[int, ...]) -> str:
    """Fail clearly when Go is missing or older than the pinned modules need (never a confusing build error)."""
    go = shutil.which("go")
    if not go:
        raise ClusterError(
            "Go is not installed or not on PATH. The local control plane is built from source: "
            f"install Go {'.'.join(map(str, required))} or newer."
        )
    result = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    found = parse_go_version(result.stdout.strip())
    if result.returncode != 0 or found < required:
        raise ClusterError(
            f"Go {'.'.join(map(str, required))} or newer is needed, found {result.stdout.strip() or 'unknown'} at {go}."
        )
    return go


def binary_path(component: str) -> Path:
    """Path of a built component binary, whichever set builds it."""
    for component_set in COMPONENT_SETS:
        if component in component_set.packages:
            return binaries_dir(component_set.name, component_set.version) / component
    raise KeyError(component)


def is_built(component_set: ComponentSet) -> bool:
    """Complete and holding every binary the set names now: a cache built before a binary joined its set (the
    Prometheus server joined promtool's) is rebuilt instead of lacking it."""
    directory = binaries_dir(component_set.name, component_set.version)
    binaries = [directory / name for name in component_set.packages]
    return (directory / COMPLETE_MARKER).exists() and all(binary.exists() for binary in binaries)


def build_component_set(
    component_set: ComponentSet,
    say: Callable[[str], None] = print,
    also: Callable[[Path], None] | None = None,
) -> Path:
    """Build one wrapper module's binaries into its versioned cache directory (atomic: a killed build leaves none).

    `also(staging)` adds what belongs with the binaries (files taken from the module's source) before the directory
    is marked complete, so a build is never complete without them."""
    target = binaries_dir(component_set.name, component_set.version)
    if is_built(component_set):
        return target
    go = check_go_toolchain(minimum_go_version(component_set.wrapper_dir / "go.mod"))
    staging = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log = cache_root() / "logs" / f"build-{component_set.name}-{component_set.version}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"building {component_set.name} {component_set.version} from its Go module (first use only; log: {log})")
    started = time.monotonic()
    command = [
        go,
        "build",
        "-trimpath",
        "-buildvcs=false",
        "-ldflags",
        component_set.ldflags(),
        "-o",
        str(staging) + "/",
        *component_set.packages.values(),
    ]
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    with log.open("w") as log_file:
        result = subprocess.run(
            command,
            cwd=component_set.wrapper_dir,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise ClusterError(
            f"building {component_set.name} {component_set.version} failed "
            f"(exit {result.returncode}); last lines of {log}:\n{log_tail(log)}"
        )
    rename_outputs(component_set, staging)
    if also is not None:
        try:
            also(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    (staging / COMPLETE_MARKER).write_text(f"{component_set.version} built in {time.monotonic() - started:.0f}s\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    say(f"built {component_set.name} {component_set.version} in {time.monotonic() - started:.0f}s")
    return target


def module_dir(component_set: ComponentSet) -> Path:
    """The pinned module's source in the Go module cache, downloaded through the module proxy if the cache lacks it:
    where manifests that belong to a binary (CRDs, RBAC) are read from, so none of them is committed here.

    `go mod download`, not `go list -m`: the latter reports a module that is not in the cache without a `Dir` (on a
    fresh machine the Kubeflow module, whose binary `make test` never builds, is not there; MultiKueue's test reads
    the PyTorchJob CRD from it)."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", component_set.module],
        cwd=component_set.wrapper_dir,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
    )
    found = json.loads(result.stdout).get("Dir") if result.returncode == 0 and result.stdout.strip() else None
    if not found:
        why = result.stderr.strip() or result.stdout
        raise ClusterError(f"cannot find the source of {component_set.module}: {why}")
    return Path(found)


def rename_outputs(component_set: ComponentSet, staging: Path) -> None:
    """`go build -o dir/` names binaries after the package path (minus a /vN suffix); give them their real names."""
    for name, package in component_set.packages.items():
        parts = package.rstrip("/").split("/")
        default_name = parts[-2] if re.fullmatch(r"v\d+", parts[-1]) else parts[-1]
        produced = staging / default_name
        if produced.name != name and produced.exists():
            produced.rename(staging / name)


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Serialize builds across processes: two builds of one set would race on its staging and target directories,
    and two Go builds at once on a small machine take longer than one after the other."""
    lock_path = cache_root() / "bin" / ".build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_built(component_sets: Iterable[ComponentSet], say: Callable[[str], None] = print) -> None:
    """Build the sets that are missing. The lock is taken only when one is: a cluster starting while another checkout
    builds an unrelated set (Kueue takes minutes) must not wait for it — that wait once timed out a whole test run."""
    missing = [s for s in component_sets if not is_built(s)]
    if not missing:
        return
    with build_lock():
        for component_set in missing:
            build_component_set(component_set, say)


def ensure_binaries(say: Callable[[str], None] = print) -> dict[str, Path]:
    """Build whatever is missing and return every binary's path."""
    ensure_built(COMPONENT_SETS, say)
    return {name: binary_path(name) for s in COMPONENT_SETS for name in s.packages}


def ensure_promtool(say: Callable[[str], None] = print) -> Path:
    """Build promtool if missing and return its path."""
    ensure_built([PROMETHEUS], say)
    return binaries_dir(PROMETHEUS.name, PROMETHEUS.version) / "promtool"


def ensure_helm(say: Callable[[str], None] = print) -> Path:
    """Build helm if missing and return its path."""
    ensure_built([HELM], say)
    return binaries_dir(HELM.name, HELM.version) / "helm"


def ensure_seaweedfs(say: Callable[[str], None] = print) -> Path:
    """Build SeaweedFS's `weed` if missing and return its path."""
    ensure_built([SEAWEEDFS], say)
    return binaries_dir(SEAWEEDFS.name, SEAWEEDFS.version) / "weed"


def pinned_versions() -> dict[str, str]:
    return {s.name: s.version for s in COMPONENT_SETS}
