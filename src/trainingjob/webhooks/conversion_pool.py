"""Big ConversionReviews are answered in one worker process, small ones at once.

Why a process and not a thread: json.loads, the conversion and json.dumps hold the GIL, so a thread would stall
the event loop just the same (a 120 MiB list stalled /healthz for 5.4 s, and with it admission, leader election and
the reconcilers). The worker gets the raw bytes and returns the answer's bytes: nothing big is parsed or built in
the operator's own process. One object per review, the common case (every watch event and single read of a job in
another version), is answered inline: a process round trip would cost more than the conversion.

The worker is started on the first big review and kept; one that died (killed for memory) is replaced on the next.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from trainingjob.api.conversion_review import ConversionAnswer, answer_conversion

logger = logging.getLogger(__name__)
# Below this a review is answered inline: a few jobs, parsed and converted in about a millisecond.
INLINE_BYTES = 256 * 1024


class ConversionUnavailable(RuntimeError):
    """The worker process died while answering (e.g. killed for memory); the review may be sent again."""


class ConversionPool:
    def __init__(self, inline_bytes: int = INLINE_BYTES) -> None:
        self.inline_bytes = inline_bytes
        self.executor: ProcessPoolExecutor | None = None

    async def answer(self, raw: bytes) -> ConversionAnswer:
        """The answer to the ConversionReview in `raw`; MalformedBody when it is none."""
        if len(raw) <= self.inline_bytes:
            return answer_conversion(raw)
        if self.executor is None:
            # spawn: a fork of a process with running threads (the event loop's executor) can deadlock.
            self.executor = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, answer_conversion, raw)
        except BrokenProcessPool:
            logger.warning("the conversion worker process died; starting another for the next review")
            self.close()
            raise ConversionUnavailable("the conversion worker process died; retry") from None

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = None
