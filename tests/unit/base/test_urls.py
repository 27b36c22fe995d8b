"""URL text that yarl's parser fails on with IndexError is refused as any other bad URL, at every
place users, policies or redirects write one."""

from __future__ import annotations

import pytest
from yarl import URL

from kinitiras_py.api.refs import url_problem
from kinitiras_py.base.urls import parse_url
from kinitiras_py.refs import outbound
from kinitiras_py.refs.egress import AllowEntry, Egress, EgressRefused
from kinitiras_py.refs.httpblock import prepare

# An empty host after user info: yarl 1.25 indexes its first character.
BROKEN = ["http://[]@", "https://[]@", "http://u:p@[]@"]


@pytest.mark.parametrize("text", BROKEN)
def test_parse_url_refuses_with_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="host is empty or malformed"):
        parse_url(text)


def test_parse_url_gives_yarl_s_url() -> None:
    assert parse_url("http://a@example.com:8080/p?q=1") == URL("http://a@example.com:8080/p?q=1")


def test_a_policy_s_url_is_refused_by_field_check() -> None:
    assert url_problem("http://[]@") == "'http://[]@' is not a URL: its host is empty or malformed"


def test_an_allow_entry_and_a_filled_url_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^'http://\[\]@' is not a URL"):
        AllowEntry.parse("http://[]@")
    with pytest.raises(EgressRefused, match="is not a valid URL"):
        Egress().check("http://[]@", False)


def test_an_http_block_and_a_redirect_are_lookup_errors() -> None:
    with pytest.raises(LookupError, match="is not a valid URL"):
        prepare({"url": "http://[]@"}, 1.0)
    with pytest.raises(LookupError, match="which is not a URL"):
        outbound._next_hop(URL("http://example.com/"), "http://[]@")
