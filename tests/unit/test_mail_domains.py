"""A tenant's mail domains as an operator names them (ops/agents.py `mail_domains`): stored as
policies compare them (lower case, each once, in order), and what is no domain refused."""

from __future__ import annotations

import pytest

from toolgate.ops.agents import mail_domains
from toolgate.ops.registry import RegistryError


def test_domains_are_kept_as_they_are_compared() -> None:
    named = [" Acme.Example", "mail.acme.example", "acme.example", "", "xn--bcher-kva.example", "a-1.co.uk"]
    assert mail_domains(named) == ["a-1.co.uk", "acme.example", "mail.acme.example", "xn--bcher-kva.example"]
    assert mail_domains([]) == [] and mail_domains([""]) == []  # none: every address is outside


@pytest.mark.parametrize(
    "bad",
    [
        "acme",
        "@acme.example",
        "ap@acme.example",
        "acme..example",
        "-acme.example",
        "acme-.example",
        "acme.example.",
        "acme example.com",
        "acmé.example",
        "a" * 64 + ".example",
        ("a" * 62 + ".") * 4 + "example",
    ],
)
def test_what_is_no_domain_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(RegistryError, match="is not a mail domain") as refused:
        mail_domains(["acme.example", bad])
    assert bad.strip() in str(refused.value)
