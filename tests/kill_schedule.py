"""The operator SIGKILLed at random instants and started again (issue 41's random kill points).

Each round starts the operator on the session operator's ports, log and Lease identity (so it retakes its own Lease
at once instead of waiting out a dead holder's), waits until it answers /healthz, lets it live a delay drawn from
the seed, and kills it with SIGKILL: no shutdown code runs, as when a node dies or the OOM killer strikes. The delay
is counted from /healthz, so some kills land before it leads or before its caches are synced, most while it
reconciles; a quarter of the kills are drawn from the process's start instead (0 to 1.5 s: webhook registration,
TLS, the first LISTs, the Lease). After the last kill one more operator is started and waited for until it leads
(/readyz).

Importing the operator's modules takes 1 s on an idle machine and 6 to 14 s on a loaded one, most of a round: so
the next processes are spawned while the current one runs, import its modules, and wait on their stdin. Its `tj
operator` starts only when the round begins; it has touched nothing (no port, no API call) before that.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol

from tests.kube import wait_until
from tests.operator_harness import (
    REPO,
    STARTED,
    RunningOperator,
    free_port,
    healthy,
    operator_arguments,
    wait_healthy,
)

IDENTITY_FLAG = "--leader-election-identity"
MAX_ALIVE_SECONDS = 2.0  # the longest an operator lives after /healthz before its kill: jobs progress between kills
STARTUP_SHARE = 0.25  # the share of kills drawn from the start instead, 0 to STARTUP_SECONDS after it
STARTUP_SECONDS = 1.5
SPARES = 2  # processes importing the operator ahead: each has two rounds to do it
PRELOADED = (
    "import sys\n"
    "import trainingjob.cli, trainingjob.operator.process\n"
    "sys.stdin.readline()\n"
    "sys.argv = ['tj', *sys.argv[1:]]\n"
    "trainingjob.cli.main()\n"
)


class Busy(Protocol):
    doing: dict[int, str]  # a slot (a job in flight) -> the step it is in


def chosen_seed() -> int:
    """TJ_KILL_SEED, or a random seed (the tests print it: it draws the scenarios and the kill instants again)."""
    return int(os.environ.get("TJ_KILL_SEED") or random.SystemRandom().randrange(2**32))


@dataclass(frozen=True)
class KillPoint:
    alive_seconds: float  # the drawn delay to the SIGKILL: from /healthz (its start in startup; a job's moment)
    startup: bool  # drawn from its start, not from /healthz: webhook registration, TLS, LISTs, the Lease
    leading: bool  # /readyz answered just before the kill
    steps: tuple[str, ...]  # what the driver's jobs were doing


@dataclass
class Chaos:
    template: RunningOperator  # ports, log, kubeconfig and arguments of every operator started
    rng: random.Random
    driver: Busy  # what the jobs are doing, for the kill log: the kill points' Driver, or one real job's test
    kills: list[KillPoint] = field(default_factory=list)
    start_seconds: list[float] = field(default_factory=list)
    spares: list[RunningOperator] = field(default_factory=list)
    current: RunningOperator | None = None

    @staticmethod
    def arguments(operator: RunningOperator, identity: str) -> tuple[str, ...]:
        """The operator's arguments with its Lease identity fixed (kept if it had one)."""
        if IDENTITY_FLAG in operator.extra_args:
            return operator.extra_args
        return (*operator.extra_args, IDENTITY_FLAG, identity)

    def spawn(self) -> RunningOperator:
        """A process that has imported the operator and waits for a line on its stdin to run `tj operator`."""
        template = self.template
        health_url = f"http://127.0.0.1:{free_port()}/healthz"
        metrics_port = free_port()
        arguments = operator_arguments(
            health_url,
            template.progress_host,
            template.progress_port,
            metrics_port,
            template.webhook_port,
            template.extra_args,
        )
        env = {**os.environ, "KUBECONFIG": str(template.kubeconfig)}
        with template.log_path.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", PRELOADED, *arguments],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
        STARTED.append(process)
        return dataclasses.replace(template, process=process, health_url=health_url, metrics_port=metrics_port)

    def start(self, healthy_first: bool = True) -> RunningOperator:
        """The spare process told to run (and the next spare spawned), once it answers /healthz (at once with
        `healthy_first` False)."""
        running = self.spares.pop(0) if self.spares else self.spawn()
        began = time.monotonic()
        if running.process.poll() is not None:
            raise AssertionError(f"a spare operator exited before its start:\n{running.log_tail()}")
        assert running.process.stdin is not None
        running.process.stdin.write(b"go\n")
        running.process.stdin.close()
        self.spares += [self.spawn() for _ in range(SPARES - len(self.spares))]
        if healthy_first:
            wait_healthy(running)
            self.start_seconds.append(time.monotonic() - began)
        return running

    def close(self) -> None:
        """Stop the spares that will not be needed."""
        for spare in self.spares:
            spare.process.kill()
            spare.process.wait(timeout=30)
        self.spares = []

    def kill_rounds(self, count: int) -> None:
        for _ in range(count):
            in_startup = self.rng.random() < STARTUP_SHARE
            self.current = self.start(healthy_first=not in_startup)
            delay = self.rng.uniform(0, STARTUP_SECONDS if in_startup else MAX_ALIVE_SECONDS)
            time.sleep(delay)  # the drawn kill instant, not a wait for anything
            self.kill_current(delay, in_startup)

    def kill_current(self, delay: float, startup: bool = False) -> KillPoint:
        """SIGKILL the operator running now (no shutdown code runs) and record the kill point."""
        assert self.current is not None, "no operator to kill"
        leading = healthy(f"{self.current.metrics_url}/readyz")
        self.current.process.kill()
        self.current.process.wait(timeout=30)
        steps = tuple(sorted(self.driver.doing.values()))
        self.kills.append(KillPoint(round(delay, 2), startup, leading, steps))
        return self.kills[-1]

    def last_start(self) -> RunningOperator:
        """The operator that stays: started and waited for until it leads (after a round cut short, its operator
        is killed first: two would share the ports)."""
        if self.current is not None and self.current.process.poll() is None:
            self.current.process.kill()
            self.current.process.wait(timeout=30)
        running = self.current = self.start()
        self.close()
        wait_until(lambda: healthy(f"{running.metrics_url}/readyz"), 60, "the last operator to lead")
        return running

    def summary(self) -> str:
        steps = collections.Counter(step for kill in self.kills for step in kill.steps)
        leading = sum(kill.leading for kill in self.kills)
        startup = sum(kill.startup for kill in self.kills)
        starts = sorted(self.start_seconds)
        median = starts[len(starts) // 2] if starts else 0
        return (
            f"{len(self.kills)} kills ({startup} drawn in startup; {leading} while leading, "
            f"{len(self.kills) - leading} before it led); "
            f"start to /healthz median {median:.1f}s, max {max(starts, default=0):.1f}s; "
            f"jobs' steps in flight at the kills: {dict(sorted(steps.items()))}"
        )
