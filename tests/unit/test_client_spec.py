"""The pure parts of the Python client: the manifest a train() call builds, job names, manifests handed to
submit(), errors carrying the API server's answer, the wait's rules and the progress display's text."""

from __future__ import annotations

import re

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from trainingjob.api import constants as k
from trainingjob.cli.kube_errors import map_api_error
from trainingjob.client import errors
from trainingjob.client.code import CODE_MOUNT_PATH, from_function
from trainingjob.client.display import LineDisplay, NoDisplay, TextBar, progress_display, text_bar
from trainingjob.client.jobs import Job
from trainingjob.client.manifests import one_manifest
from trainingjob.client.spec import job_manifest, job_name, merged, with_code
from trainingjob.client.waiting import settled, wanted_phases

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def train(epochs: int) -> None:
    print(epochs)


@pytest.mark.parametrize("base", ["train", "Train_Model!", "9lives", "_", "x" * 200, "a--b"])
def test_job_names_are_fresh_dns_labels_that_leave_room_for_children(base: str) -> None:
    names = {job_name(base) for _ in range(20)}
    assert len(names) > 1  # random tails: the same cell run twice submits two jobs
    for name in names:
        assert DNS_LABEL.match(name) and len(name) <= k.MAX_JOB_NAME_LENGTH, name


def test_merged_merges_objects_and_replaces_lists() -> None:
    base = {"scheduling": {"nodeSelector": {"a": "1"}}, "volumes": [{"name": "v"}], "workers": 1}
    extra = {"scheduling": {"tolerations": [{"key": "t"}]}, "volumes": [{"name": "w"}]}
    assert merged(base, extra) == {
        "scheduling": {"nodeSelector": {"a": "1"}, "tolerations": [{"key": "t"}]},
        "volumes": [{"name": "w"}],
        "workers": 1,
    }


def test_the_manifest_leaves_out_what_was_not_given_so_defaults_apply() -> None:
    manifest = job_manifest("j", framework="pytorch", image="img", workers=2, env={"A": 1}, spec={"suspend": True})
    assert manifest == {
        "apiVersion": k.API_VERSION,
        "kind": k.KIND,
        "metadata": {"name": "j"},
        "spec": {
            "framework": "pytorch",
            "image": "img",
            "workers": 2,
            "env": [{"name": "A", "value": "1"}],
            "suspend": True,
        },
    }


def test_code_replaces_command_and_args_and_mounts_its_config_map_beside_the_users_volumes() -> None:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}
    spec = {"command": ["x"], "args": ["y"], "volumes": [volume]}
    manifest = with_code(job_manifest("j", framework="pytorch", spec=spec), from_function(train))
    assert manifest["spec"]["command"] == ["python3", f"{CODE_MOUNT_PATH}/launch.py"]
    assert "args" not in manifest["spec"]
    assert manifest["spec"]["volumes"] == [volume, {"name": "code", "configMap": {"name": "j-code"}}]
    assert manifest["spec"]["volumeMounts"] == [{"name": "code", "mountPath": CODE_MOUNT_PATH, "readOnly": True}]


def test_submit_takes_one_trainingjob_as_a_dict_yaml_text_or_file(tmp_path) -> None:
    body = job_manifest("j", framework="pytorch", image="i", command=["c"])
    assert one_manifest(body) == body and one_manifest(body) is not body
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: ml.example.com/v1\nkind: TrainingJob\nmetadata: {name: a}\nspec: {}\n")
    assert one_manifest(path)["metadata"]["name"] == "a"
    assert one_manifest(str(path))["metadata"]["name"] == "a"
    assert one_manifest(path.read_text())["metadata"]["name"] == "a"
    with pytest.raises(errors.TrainingClientError, match="one TrainingJob at a time; found 2"):
        one_manifest(path.read_text() + "---\n" + path.read_text())
    with pytest.raises(errors.TrainingClientError, match="is v1/Pod, not a TrainingJob"):
        one_manifest({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})


def api_error(status: int, reason: str, message: str) -> ApiException:
    error = ApiException(status=status, reason="ignored")
    error.body = f'{{"kind": "Status", "reason": "{reason}", "message": "{message}", "details": {{"name": "j"}}}}'
    return error


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (404, "NotFound", errors.NotFound),
        (409, "AlreadyExists", errors.AlreadyExists),
        (409, "Conflict", errors.Conflict),
        (422, "Invalid", errors.Invalid),
        (403, "Forbidden", errors.Forbidden),
        (401, "Unauthorized", errors.Unauthorized),
        (500, "InternalError", errors.ApiError),
    ],
)
def test_api_errors_keep_the_api_servers_status_reason_and_message(status: int, reason: str, kind: type) -> None:
    message = "spec.workers: Invalid value: 0: should be greater than or equal to 1"
    error = errors.from_cli_error(map_api_error(api_error(status, reason, message), namespace="ns", name="j"))
    assert type(error) is kind
    assert (error.status, error.reason, error.api_message) == (status, reason, message)


def test_no_answer_is_unreachable() -> None:
    from trainingjob.cli.common import CliError

    assert isinstance(errors.from_cli_error(CliError("cannot reach the Kubernetes API at x")), errors.Unreachable)


def job(phase: str, **status: object) -> Job:
    body = {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"workers": 2}, "status": {"phase": phase, **status}}
    return Job.from_body(body)


def test_a_wait_ends_in_the_wanted_phase_and_raises_for_a_failure_or_another_end() -> None:
    wanted = wanted_phases("Succeeded")
    assert not settled(job("Running"), wanted)
    assert settled(job("Succeeded"), wanted)
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}]}
    with pytest.raises(errors.JobFailed, match="j failed: BackoffLimitExceeded: m") as raised:
        settled(job("Failed", **failed), wanted)
    assert raised.value.job.phase == "Failed"
    with pytest.raises(errors.TrainingClientError, match="ended Succeeded without being Running"):
        settled(job("Succeeded"), wanted_phases("Running"))
    assert settled(job("Failed"), wanted_phases(["Succeeded", "Failed"]))
    with pytest.raises(ValueError, match="got Done"):
        wanted_phases("Done")


def test_the_job_view_reads_progress_and_summary() -> None:
    view = job("Running", progress={"epoch": 2, "totalEpochs": 4, "metrics": {"loss": 0.5}})
    assert view.progress is not None and (view.progress.percent, view.progress.epoch) == (50.0, 2)
    assert view.summary.startswith("Running · workers 0/2 running · 50%")
    assert job("Pending").progress is None and not job("Pending").finished


def test_the_text_bar_fills_with_the_percent_and_escapes_what_workers_sent() -> None:
    assert text_bar(None, width=4) == "[....]   ?%"
    assert text_bar(50.0, width=4) == "[##..]  50%"
    assert text_bar(100.0, width=4) == "[####] 100%"
    hostile = job("Running", progress={"metrics": {"<script>": 1.0}})
    assert "<script>" not in TextBar(hostile)._repr_html_()
    assert "<script>" in repr(TextBar(hostile))


def test_outside_a_notebook_the_display_is_off_unless_asked_for(capsys) -> None:
    assert isinstance(progress_display(None), NoDisplay)
    display = progress_display(True)
    assert isinstance(display, LineDisplay)
    for phase in ("Running", "Running", "Succeeded"):
        display.show(job(phase))
    assert capsys.readouterr().err.splitlines() == [
        "j: Running · workers 0/2 running",
        "j: Succeeded · no worker running · done (no progress reported)",
    ]
