"""Running one probe, as the kubelet's prober does: httpGet, tcpSocket, exec. Each returns (ok, message).

httpGet succeeds on a status from 200 to 399 (the kubelet's rule), sends `User-Agent: kube-probe/<major>.<minor>`
and `Accept: */*` unless the probe sets them, never verifies an HTTPS certificate, and follows no redirect (a
redirect is a 3xx: success). tcpSocket succeeds once a connection opens. exec runs the command inside the
container (runtime/enter.py) and succeeds on exit code 0; a command that outlives the timeout is killed and fails.
Messages read like the kubelet's, so `kubectl describe pod` shows familiar Unhealthy events.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import aiohttp

from trainingjob.node.probes.spec import Handler

OUTPUT_LIMIT = 10 * 1024


async def http_get(handler: Handler, pod_ip: str, limit_seconds: float, kube_version: str) -> tuple[bool, str]:
    host = handler.host or pod_ip
    url = f"{handler.scheme.lower()}://{host}:{handler.port}{handler.path}"
    major_minor = ".".join(kube_version.lstrip("v").split(".")[:2])
    headers = {"User-Agent": f"kube-probe/{major_minor}", "Accept": "*/*"}
    headers.update(dict(handler.headers))
    connector = aiohttp.TCPConnector(force_close=True, ssl=False)
    limit = aiohttp.ClientTimeout(total=limit_seconds)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, timeout=limit) as session,
            session.get(url, headers=headers, allow_redirects=False) as response,
        ):
            if 200 <= response.status < 400:
                return True, ""
            body = (await response.content.read(OUTPUT_LIMIT)).decode(errors="replace")
            return False, f"HTTP probe failed with statuscode: {response.status}" + (f": {body}" if body else "")
    except TimeoutError:
        return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
    except aiohttp.ClientConnectorError as error:
        return False, f'Get "{url}": dial tcp {host}:{handler.port}: connect: {_reason(error.os_error)}'
    except aiohttp.ClientError as error:
        return False, f'Get "{url}": {error}'


def _reason(error: OSError) -> str:
    """Go's wording: the errno's text ("connection refused"), not asyncio's "Connect call failed (...)"."""
    return (os.strerror(error.errno) if error.errno else str(error)).lower()


async def tcp_socket(handler: Handler, pod_ip: str, limit_seconds: float) -> tuple[bool, str]:
    host = handler.host or pod_ip
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, handler.port), limit_seconds)
    except TimeoutError:
        return False, f"dial tcp {host}:{handler.port}: i/o timeout"
    except OSError as error:
        return False, f"dial tcp {host}:{handler.port}: connect: {_reason(error)}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, ""


async def exec_command(handler: Handler, attempt_dir: Path, limit_seconds: float) -> tuple[bool, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainingjob.node.runtime.enter",
        str(attempt_dir),
        *handler.command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), limit_seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # the command too: it is in the entering process's group
        await process.wait()
        return False, f"command {list(handler.command)!r} timed out"
    text = output[-OUTPUT_LIMIT:].decode(errors="replace").strip()
    if process.returncode == 0:
        return True, text
    return False, text or f"command {list(handler.command)!r} exited with {process.returncode}"
