"""serve --use-apiserver-cache: spelled as kube-state-metrics spells it, true by default."""

from __future__ import annotations

import pytest

from exporter.cli import build_parser
from exporter.cli.serve import serve_options


@pytest.mark.parametrize(
    ("flags", "cached"),
    [
        ([], True),
        (["--use-apiserver-cache"], True),
        (["--use-apiserver-cache=true"], True),
        (["--use-apiserver-cache=false"], False),
        (["--use-apiserver-cache", "false"], False),
        (["--use-apiserver-cache=F"], False),
    ],
)
def test_the_flag_reaches_the_informers(flags: list[str], cached: bool) -> None:  # noqa: FBT001
    args = build_parser().parse_args(["serve", "--kubeconfig", "k", *flags])
    assert serve_options(args).informer.use_apiserver_cache is cached


def test_a_value_that_is_not_a_boolean_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args(["serve", "--use-apiserver-cache=maybe"])
    assert raised.value.code == 2
    assert "invalid boolean value 'maybe'" in capsys.readouterr().err
