"""DTRAIN_ARM_ENDPOINT is read as the HTTP stack reads it: a URL that parsers disagree on is refused,
and only a genuine loopback host with no userinfo may use plain http or a static token."""
from __future__ import annotations

import pytest
from urllib3.util import parse_url

from dtrain.backends.azure.client import endpoint_from_env
from dtrain.backends.azure.endpoint_url import UnsafeEndpoint, parse_endpoint
from dtrain.errors import ConfigError

LOOPBACK = ["http://127.0.0.1", "http://127.0.0.1:8080", "http://127.0.0.1:8080/", "http://127.0.0.2:1/arm",
            "http://127.255.255.254", "http://localhost:5000", "http://LOCALHOST", "http://[::1]:8080",
            "http://[0:0:0:0:0:0:0:1]"]
HTTPS_REMOTE = ["https://management.usgovcloudapi.net", "https://arm.example.com:8443/base/"]
# each one: a shape two parsers can read differently, refused whatever the scheme
AMBIGUOUS = [
    "http://evil.example.com\\@127.0.0.1",              # urllib.parse: 127.0.0.1; urllib3: evil.example.com
    "https://evil.example.com\\@management.azure.com",
    "http:\\\\127.0.0.1", "http:/127.0.0.1", "127.0.0.1:8080", "ftp://127.0.0.1",
    "http://user@127.0.0.1", "http://user:pw@127.0.0.1", "http://127.0.0.1@evil.example.com",
    "http://127.0.0.1%2f@evil.example.com", "http://%31%32%37.0.0.1", "http://[::1%25lo]",
    "http://127.0.0.1#@evil.example.com", "http://127.0.0.1?@evil.example.com", "http://evil.example.com#@127.0.0.1",
    "http://127.0.0.1\t", "http://127.0.0.1 /", " http://127.0.0.1", "http://127.0.0.1\n", "http://127.0.0.1\x00",
    "http://127.0.0.\t1", "http://127.0.0.1:99999", "http://127.0.0.1:", "http://127.0.0.1:0x50",
    "http://ＬＯＣＡＬＨＯＳＴ", "http://127.0.0.1/a b", "http://127.0.0.1/%2e%2e",
]
# unambiguous, but not a loopback address without a resolver's help: plain http refused
NOT_LOOPBACK = ["http://localhost.", "http://0x7f.1", "http://0x7f000001", "http://2130706433", "http://127.1",
                "http://0177.0.0.1", "http://127.000.000.001", "http://[::ffff:127.0.0.1]", "http://[::]",
                "http://localhost.evil.example.com", "http://127.0.0.1.nip.io", "http://0.0.0.0",
                "http://evil.example.com"]


@pytest.mark.parametrize("url", LOOPBACK)
def test_genuine_loopback_is_accepted_with_http_and_a_static_token(url):
    ep = endpoint_from_env({"DTRAIN_ARM_ENDPOINT": url, "DTRAIN_ARM_TOKEN": "tok"})
    assert ep.loopback and ep.token == "tok" and ep.url == url.rstrip("/")


@pytest.mark.parametrize("url", HTTPS_REMOTE)
def test_https_elsewhere_is_accepted_without_a_static_token(url):
    ep = endpoint_from_env({"DTRAIN_ARM_ENDPOINT": url})
    assert not ep.loopback and ep.custom
    with pytest.raises(ConfigError) as err:
        endpoint_from_env({"DTRAIN_ARM_ENDPOINT": url, "DTRAIN_ARM_TOKEN": "tok"})
    assert err.value.exit_code == 6


@pytest.mark.parametrize("url", AMBIGUOUS)
def test_ambiguous_urls_are_refused(url):
    with pytest.raises(UnsafeEndpoint):
        parse_endpoint(url)
    with pytest.raises(ConfigError) as err:
        endpoint_from_env({"DTRAIN_ARM_ENDPOINT": url, "DTRAIN_ARM_TOKEN": "secret-token"})
    assert err.value.exit_code == 6
    assert "secret-token" not in str(err.value) + str(err.value.hint or "")
    assert "pw" not in str(err.value)                   # a password in the URL is not echoed


@pytest.mark.parametrize("url", NOT_LOOPBACK)
def test_hosts_that_need_a_resolver_are_not_loopback(url):
    assert parse_endpoint(url).loopback is False
    for env in ({"DTRAIN_ARM_ENDPOINT": url}, {"DTRAIN_ARM_ENDPOINT": url.replace("http:", "https:"),
                                               "DTRAIN_ARM_TOKEN": "tok"}):
        with pytest.raises(ConfigError):
            endpoint_from_env(env)


def test_the_reported_bypass_is_what_the_stack_would_connect_to():
    """The premise of the check: urllib3 (under requests and azure-core) connects to evil.example.com."""
    url = "http://evil.example.com\\@127.0.0.1"
    assert parse_url(url).host == "evil.example.com"
    with pytest.raises(ConfigError) as err:
        endpoint_from_env({"DTRAIN_ARM_ENDPOINT": url, "DTRAIN_ARM_TOKEN": "tok"})
    assert "backslash" in str(err.value)


def test_the_loopback_policy_reads_request_urls_as_urllib3_does():
    from azure.core.pipeline import PipelineContext, PipelineRequest
    from azure.core.rest import HttpRequest

    from dtrain.backends.azure.client import _loopback_policy_class

    policy = _loopback_policy_class()()

    def relaxed(url):
        req = PipelineRequest(HttpRequest("GET", url), PipelineContext(None))
        policy.on_request(req)
        return req.context.get("enforce_https", True) is False

    assert relaxed("http://127.0.0.1:8080/subscriptions/x?api-version=1")
    assert relaxed("http://[::1]:8080/x")
    assert not relaxed("http://evil.example.com\\@127.0.0.1/x")
    assert not relaxed("http://user@127.0.0.1/x")
    assert not relaxed("http://2130706433/x")
    assert not relaxed("https://127.0.0.1/x")            # https needs no relaxing
