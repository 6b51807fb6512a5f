"""What `tj get`, `tj describe`, `tj watch` and `tj sweep` print of text they do not control (issue 41).

A checkpoint path comes from a worker's report, a condition or Event message from other controllers and admission
policies (a ValidatingAdmissionPolicy's message is whatever its author wrote). Found by trying: rich passes ESC
through, so `\\x1b]52;c;...` in a message reached the reader's terminal (some write it to the clipboard), and
`tj watch` fed the status message to rich as markup, so a message holding "[/x]" crashed it with MarkupError.
"""

from __future__ import annotations

import io
import re
import sys

from rich.console import Console

from tests.unit.test_cli_render import NOW, job
from trainingjob.cli import follow, render, render_describe, sweeps

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # OSC 52: "put `rm -rf ~` on the clipboard"
CLEAR = "\x1b[2J"
REVERSED = "\u202egpj.exe"
HOSTILE = f"saved [/x] {CLIPBOARD}{CLEAR}{REVERSED}\x9b31m\r"


def rendered(renderable: object) -> str:
    """What a terminal receives: rich as it prints to a terminal, styles and all."""
    console = Console(file=io.StringIO(), force_terminal=True, width=400, color_system="standard")
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def without_styles(text: str) -> str:
    """`text` less the SGR sequences rich itself writes (bold, colours): what is left came from the cells."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def assert_inert(text: str) -> None:
    for character in ("\x1b", "\x9b", "\u202e", "\r"):
        assert character not in text, repr(text)


def hostile_job() -> dict:
    return job(
        phase="Running",
        message=HOSTILE,
        lastCheckpoint={"epoch": 2, "path": f"/ckpt/{HOSTILE}"},
        conditions=[{"type": "Running", "status": "True", "reason": "Why", "message": HOSTILE}],
        workerStatuses=[{"workerId": 0, "podName": "p-0", "phase": "Failed", "reason": HOSTILE}],
    )


def test_describe_shows_control_characters_as_question_marks() -> None:
    events = [{"type": "Warning", "reason": "Odd", "message": HOSTILE, "lastTimestamp": "2026-03-01T11:59:00Z"}]
    text = without_styles(rendered(render_describe.describe(hostile_job(), events, NOW)))
    assert_inert(text)
    assert "saved [/x] ?]52;c;cm0gLXJmIH4=?\\?[2J?gpj.exe?31m?" in text
    assert text.count("saved [/x]") == 5, "message, checkpoint, condition, worker reason and Event all shown"


def test_the_job_table_shows_control_characters_as_question_marks() -> None:
    row = render.job_row(job(phase=HOSTILE), NOW)
    table = render.format_table(render.job_headers(False), [row])
    assert_inert(table)
    assert "saved [/x]" in table


def test_watch_shows_a_message_with_markup_and_escapes_as_text() -> None:
    display = follow._Display("team/mnist")
    display.tty = True  # the rich progress line, as on a terminal
    display.show(job(phase="Pending", message=HOSTILE))
    text = without_styles(rendered(display.progress.make_tasks_table(display.progress.tasks)))
    assert_inert(text)
    assert "saved [/x]" in text, "the markup-like text shown, not parsed (it raised MarkupError)"


def test_watch_without_a_terminal_prints_control_characters_as_question_marks(capsys: object) -> None:
    assert not sys.stdout.isatty()
    follow._Display("team/mnist").show(job(phase="Pending", message=HOSTILE))
    printed = capsys.readouterr().out  # type: ignore[attr-defined]
    assert_inert(printed.rstrip("\n"))
    assert "saved [/x]" in printed


def test_sweep_cells_are_shown_the_same_way() -> None:
    assert sweeps.printable(HOSTILE) == render.shown(HOSTILE)
    assert_inert(render.shown(HOSTILE))
