"""The live progress a `wait()` shows: a widget bar in a notebook (ipywidgets, the `notebook` extra), else a text
bar updated in place through IPython's display handles, else one line per change on a terminal.

What is shown comes from workers (metric names, messages) and is untrusted: it is escaped before it becomes HTML.
IPython and ipywidgets are imported only inside a running IPython, so a plain script never loads them.
"""

from __future__ import annotations

import html
import sys
from typing import Any, Protocol

from trainingjob.api.status import Phase
from trainingjob.client.jobs import Job

BAR_WIDTH = 30


class ProgressDisplay(Protocol):
    def show(self, job: Job) -> None: ...

    def close(self) -> None: ...


class NoDisplay:
    def show(self, job: Job) -> None:
        pass

    def close(self) -> None:
        pass


class LineDisplay:
    """A terminal or a log: one line on stderr whenever the summary changes."""

    def __init__(self) -> None:
        self.last = ""

    def show(self, job: Job) -> None:
        line = f"{job.name}: {job.summary}"
        if line != self.last:
            print(line, file=sys.stderr, flush=True)
            self.last = line

    def close(self) -> None:
        pass


def text_bar(percent: float | None, width: int = BAR_WIDTH) -> str:
    """`[#########.....]  42%`, or a bar of dots with `  ?%` while nothing was reported."""
    if percent is None:
        return f"[{'.' * width}]   ?%"
    filled = round(width * max(0.0, min(100.0, percent)) / 100)
    return f"[{'#' * filled}{'.' * (width - filled)}] {percent:3.0f}%"


class TextBar:
    """What the display handle shows: the bar and the summary, as HTML for notebooks and as text elsewhere."""

    def __init__(self, job: Job) -> None:
        self.text = f"{job.name} {text_bar(job.progress.percent if job.progress else None)} {job.summary}"

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.text)}</pre>"

    def __repr__(self) -> str:
        return self.text


class HandleDisplay:
    """IPython without ipywidgets: one output updated in place."""

    def __init__(self) -> None:
        from IPython.display import display

        self.handle: Any = display(TextBar(_pending()), display_id=True)

    def show(self, job: Job) -> None:
        self.handle.update(TextBar(job))

    def close(self) -> None:
        pass


class WidgetDisplay:
    """ipywidgets: a progress bar that turns green or red at the end, and the summary beside it."""

    def __init__(self) -> None:
        import ipywidgets
        from IPython.display import display

        self.bar = ipywidgets.FloatProgress(value=0.0, min=0.0, max=100.0, description="")
        self.label = ipywidgets.HTML(value="")
        display(ipywidgets.HBox([self.bar, self.label]))

    def show(self, job: Job) -> None:
        percent = job.progress.percent if job.progress else None
        self.bar.description = job.name[:20]
        self.bar.value = percent or 0.0
        self.bar.bar_style = {Phase.SUCCEEDED: "success", Phase.FAILED: "danger"}.get(job.phase, "info")
        self.label.value = html.escape(job.summary)

    def close(self) -> None:
        pass


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython with a kernel), without importing IPython otherwise."""
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_display(show: bool | None) -> ProgressDisplay:
    """The display for a wait: `show` None shows it in notebooks only, True everywhere, False nowhere."""
    notebook = in_notebook()
    if show is False or (show is None and not notebook):
        return NoDisplay()
    if not notebook:
        return LineDisplay()
    try:
        return WidgetDisplay()
    except ImportError:
        return HandleDisplay()


def _pending() -> Job:
    return Job.from_body({"metadata": {"name": ""}, "status": {"phase": Phase.PENDING.value}})
