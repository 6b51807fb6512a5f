"""The storage migration behind `tj migrate-storage`: rewrite every TrainingJob in the storage version, then drop
the old versions from the CRD's status.storedVersions (what kube-storage-version-migrator does, for this one
resource).

Objects stay in etcd in the version they were last written in. After the CRD's storage version became v1, jobs
written before are still stored as v1alpha1: reading them in v1 needs the conversion webhook, and v1alpha1 cannot
be removed from the CRD while status.storedVersions lists it. A write of the unchanged object makes the API server
encode it in the storage version again; objects created meanwhile are stored in it already. Run it with the
operator running (its webhook converts the objects being read) and as someone who may update every TrainingJob and
the CRD's status; it is safe to interrupt and to run again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.kube.status import api_message

PAGE = 100
PARALLEL = 8
RETRIES = 5


@dataclass
class Migration:
    storage_version: str
    stored_before: list[str]
    stored_after: list[str]
    rewritten: int = 0
    gone: int = 0  # deleted while we worked
    failed: list[str] = field(default_factory=list)


async def _crd(extensions: client.ApiextensionsV1Api) -> dict[str, Any]:
    return extensions.api_client.sanitize_for_serialization(
        await extensions.read_custom_resource_definition(k.CRD_NAME)
    )


async def _rewrite(custom: client.CustomObjectsApi, job: dict[str, Any], version: str, migration: Migration) -> None:
    """Write the job back unchanged; on a conflict read it again and retry, as a migrator must."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    conflict = ""
    for _ in range(RETRIES):
        try:
            await custom.replace_namespaced_custom_object(k.GROUP, version, namespace, k.PLURAL, name, job)
            migration.rewritten += 1
            return
        except ApiException as error:
            if error.status == 404:
                migration.gone += 1
                return
            if error.status != 409:
                migration.failed.append(f"{namespace}/{name}: {error.status} {error.reason}")
                return
            conflict = api_message(error)
        try:
            job = await custom.get_namespaced_custom_object(k.GROUP, version, namespace, k.PLURAL, name)
        except ApiException as error:
            if error.status == 404:
                migration.gone += 1
                return
            raise
    # The API server's words for the last conflict: a writer racing us, or a refusal that no retry can pass.
    migration.failed.append(f"{namespace}/{name}: still conflicting after {RETRIES} attempts ({conflict})")


async def migrate_storage(api: client.ApiClient, dry_run: bool = False) -> Migration:
    extensions, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    crd = await _crd(extensions)
    storage = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    before = list((crd.get("status") or {}).get("storedVersions") or [])
    migration = Migration(storage, before, before)
    slots = asyncio.Semaphore(PARALLEL)

    async def rewrite(job: dict[str, Any]) -> None:
        async with slots:
            await _rewrite(custom, job, storage, migration)

    token = None
    while True:
        page = await custom.list_cluster_custom_object(k.GROUP, storage, k.PLURAL, limit=PAGE, _continue=token)
        if not dry_run:
            await asyncio.gather(*(rewrite(job) for job in page.get("items") or []))
        else:
            migration.rewritten += len(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            break
    if dry_run or migration.failed or before == [storage]:
        return migration
    patch = {
        "metadata": {"resourceVersion": crd["metadata"]["resourceVersion"]},
        "status": {"storedVersions": [storage]},
    }
    try:
        await extensions.patch_custom_resource_definition_status(
            k.CRD_NAME, patch, _content_type="application/merge-patch+json"
        )
    except ApiException as error:
        if error.status != 409:
            raise
        # The CRD changed meanwhile (e.g. the operator re-pointed its webhook): only the versions matter here.
        latest = await _crd(extensions)
        patch["metadata"]["resourceVersion"] = latest["metadata"]["resourceVersion"]
        await extensions.patch_custom_resource_definition_status(
            k.CRD_NAME, patch, _content_type="application/merge-patch+json"
        )
    migration.stored_after = [storage]
    return migration
