"""`python -m bench.toggles`: Kopf's startup barrier with its stock ToggleSet and with ours (operator/toggles.py).

Replays what a restarted operator's Kopf does with N listed objects, without a cluster: one toggle per object in
one `ToggleSet(all)`, one parked worker per object waiting for the set to turn on, then each toggle dropped as its
object is indexed. Prints the seconds until every worker is released, for each N and each set.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from kopf._cogs.aiokits import aiotoggles

from trainingjob.operator.toggles import CountedToggleSet


async def release_time(toggle_set_class: type[aiotoggles.ToggleSet], objects: int) -> float:
    toggles = toggle_set_class(all)
    blocker = await toggles.make_toggle(name="orchestration blocker")
    per_object = [await toggles.make_toggle(name=f"object-{i}") for i in range(objects)]
    await toggles.drop_toggle(blocker)
    started = time.perf_counter()
    workers = [asyncio.create_task(toggles.wait_for(True)) for _ in range(objects)]
    await asyncio.sleep(0)
    for toggle in per_object:
        await toggles.drop_toggle(toggle)
        await asyncio.sleep(0)  # each object is indexed by a task of its own: the parked workers run in between
    await asyncio.gather(*workers)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--stock-max", type=int, default=4000, help="skip the stock set above this many objects")
    args = parser.parse_args()
    print("| objects | Kopf's ToggleSet (s) | CountedToggleSet (s) |\n|---|---|---|")
    for objects in args.objects:
        stock = (
            f"{asyncio.run(release_time(aiotoggles.ToggleSet, objects)):.2f}"
            if objects <= args.stock_max
            else "not run"
        )
        ours = asyncio.run(release_time(CountedToggleSet, objects))
        print(f"| {objects} | {stock} | {ours:.3f} |", flush=True)


if __name__ == "__main__":
    main()
