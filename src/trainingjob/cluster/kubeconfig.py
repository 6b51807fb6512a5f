"""Kubeconfig files for the admin and for each control-plane component (client-certificate auth)."""

from __future__ import annotations

from pathlib import Path

import yaml


def kubeconfig_document(
    cluster_name: str, server: str, ca_file: Path, cert_file: Path, key_file: Path, user: str
) -> dict:
    """A one-context kubeconfig; file references keep secrets out of the document itself."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert_file), "client-key": str(key_file)}}],
        "contexts": [{"name": f"{user}@{cluster_name}", "context": {"cluster": cluster_name, "user": user}}],
        "current-context": f"{user}@{cluster_name}",
    }


def write_kubeconfig(path: Path, cluster_name: str, server: str, pki_dir: Path, cert_stem: str) -> Path:
    document = kubeconfig_document(
        cluster_name,
        server,
        pki_dir / "ca.crt",
        pki_dir / f"{cert_stem}.crt",
        pki_dir / f"{cert_stem}.key",
        cert_stem,
    )
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
    return path
