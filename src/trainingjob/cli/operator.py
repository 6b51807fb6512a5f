"""`tj operator`: run the operator against the cluster in KUBECONFIG (or in-cluster).

Its options are made from the settings' fields (config.py: OperatorSettings and the OperatorConfig, ServingConfig
and WebhookOptions it holds): a setting's flag, help, default and how its text reads are written once, there. The
Deployment (deploy/manager/) and the Helm chart pass flags that tests/unit/test_operator_settings.py checks
against them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import click

from trainingjob.config import OperatorConfig, OperatorSettings, ServingConfig, WebhookOptions
from trainingjob.options import Option, field_default, option_of

# Where each group of options goes: the settings themselves and the objects they hold, by their field name there.
SECTIONS: tuple[tuple[str, type], ...] = (
    ("settings", OperatorSettings),
    ("config", OperatorConfig),
    ("serving", ServingConfig),
    ("webhooks", WebhookOptions),
)


def settings_options() -> Iterator[tuple[str, dataclasses.Field, Option]]:
    """(parameter name, field, option) of every setting `tj operator` takes."""
    for section, cls in SECTIONS:
        for field in dataclasses.fields(cls):
            option = option_of(field)
            if option is not None:
                yield f"{section}__{field.name}", field, option


def click_type(option: Option) -> Any:
    if option.choices:
        return click.Choice(option.choices, case_sensitive=False)
    if option.bounds is not None and option.kind is int:
        return click.IntRange(int(option.bounds[0]), int(option.bounds[1]))
    if option.bounds is not None and option.kind is float:
        return click.FloatRange(option.bounds[0], option.bounds[1])
    return option.kind if option.kind in (int, float) else None


def click_option(name: str, field: dataclasses.Field, option: Option) -> Callable[[Any], Any]:
    arguments: dict[str, Any] = {"help": option.help or None, "envvar": option.envvar, "metavar": option.metavar}
    default = field_default(field)
    if option.multiple:
        arguments["multiple"] = True
    elif option.is_flag or option.kind is bool:  # --flag, or --flag/--no-flag
        arguments.update(default=default, show_default=option.show_default)
        if option.is_flag:
            arguments["is_flag"] = True
    else:
        shown = option.text(default) if option.text is not None else default
        arguments.update(default=shown, type=click_type(option), show_default=option.show_default)
    return click.option(*option.flags, name, **arguments)


def with_settings_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for name, field, option in reversed(list(settings_options())):
        command = click_option(name, field, option)(command)
    return command


def settings_from(given: dict[str, Any]) -> OperatorSettings:
    """The settings the command line gave (click's values by parameter name); BadParameter for a value that does
    not read, UsageError for settings that do not go together."""
    values: dict[str, dict[str, Any]] = {section: {} for section, _ in SECTIONS}
    for name, field, option in settings_options():
        raw = given[name]
        if option.multiple and not raw:
            continue  # the field's default stays
        try:
            values[name.partition("__")[0]][field.name] = option.read(raw) if option.read is not None else raw
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint=option.flags[0]) from None
    try:
        webhooks = WebhookOptions(**values["webhooks"])
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--webhook-cert-validity") from None
    config = OperatorConfig(**values["config"], serving=ServingConfig(**values["serving"]))
    try:
        return OperatorSettings(**values["settings"], config=config, webhooks=webhooks)
    except ValueError as error:
        raise click.UsageError(str(error)) from None


@click.command()
@with_settings_options
def operator(**given: Any) -> None:
    """Run the operator until interrupted."""
    settings = settings_from(given)
    from trainingjob.operator.runner import run_operator

    run_operator(settings)
