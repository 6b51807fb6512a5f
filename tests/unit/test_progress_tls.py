"""The progress endpoint's certificate names the address workers are told to use (--progress-url): a worker on a
local process node reaches an operator run outside the cluster at the pod network's gateway, and checks the
certificate against that address."""

from __future__ import annotations

from trainingjob.progress.tls import certificate_ips, generate, service_names, url_ips


def test_an_ip_in_the_progress_url_is_one_to_name_and_a_host_name_is_not() -> None:
    assert url_ips("https://10.244.0.1:8443") == ["10.244.0.1"]
    assert url_ips("https://[fd00::1]:8443") == ["fd00::1"]
    assert url_ips("https://trainingjob-operator.trainingjob-system.svc:8443") == []
    assert url_ips(None) == []


def test_the_certificate_names_the_given_addresses() -> None:
    material = generate(service_names("trainingjob-system", "trainingjob-operator"), ["127.0.0.1", "10.244.0.1"])
    assert certificate_ips(material.cert_pem) == {"127.0.0.1", "10.244.0.1"}
