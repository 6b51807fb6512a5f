"""The operator's webhooks: conversion between the served versions, admission defaults and checks, their TLS and
their registration with the API server. One component for the operator's startup: start_webhooks() / stop()."""

from trainingjob.webhooks.component import Webhooks, WebhookSettings, start_webhooks
from trainingjob.webhooks.server import PortUnavailable

__all__ = ["PortUnavailable", "WebhookSettings", "Webhooks", "start_webhooks"]
