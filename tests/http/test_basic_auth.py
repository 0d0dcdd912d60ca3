"""Basic auth's answers at the edges bcrypt has: long passwords, costs, unknown users."""

from __future__ import annotations

import base64
from pathlib import Path

import bcrypt
import pytest

from exporter.http.auth import BasicAuth
from exporter.http.webconfig import (
    BCRYPT_MAX_COST,
    MAX_PASSWORD_BYTES,
    WebConfigError,
    load_web_config,
)

# The least cost bcrypt accepts: the tests hash quickly, and the checks are the same.
COST = 4
PASSWORD = b"s3cret"
HASHED = bcrypt.hashpw(PASSWORD, bcrypt.gensalt(COST))


def status_of(auth: BasicAuth, user: bytes, password: bytes) -> str:
    """The status the server answers, deciding as it does: `known` first, `check` after."""
    token = base64.b64encode(user + b":" + password).decode()
    header = f"Basic {token}"
    verdict = auth.known(header)
    if verdict is None:
        verdict = auth.check(header)
    return "200 OK" if verdict else "401 Unauthorized"


@pytest.mark.parametrize("user", [b"prometheus", b"nobody"], ids=["known", "unknown"])
def test_a_password_longer_than_bcrypt_reads_is_401(user: bytes) -> None:
    """bcrypt 5 raises on passwords over 72 bytes: an answer, never a 500 and a traceback."""
    app = BasicAuth({"prometheus": HASHED})
    long = PASSWORD + b"x" * (MAX_PASSWORD_BYTES + 1 - len(PASSWORD))
    assert status_of(app, user, long).startswith("401")
    assert status_of(app, user, b"y" * 10_000).startswith("401")
    # 72 bytes is still a password bcrypt reads whole.
    at_limit = bcrypt.hashpw(b"z" * MAX_PASSWORD_BYTES, bcrypt.gensalt(COST))
    app = BasicAuth({"prometheus": at_limit})
    assert status_of(app, b"prometheus", b"z" * MAX_PASSWORD_BYTES).startswith("200")


@pytest.mark.parametrize("cost", [COST, 6])
def test_an_unknown_user_costs_one_check_of_the_configured_cost(
    cost: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refusing an unknown user hashes as much as refusing a known one: the time of the
    answer does not tell which users exist, whatever cost the hashes were made with."""
    hashed = bcrypt.hashpw(PASSWORD, bcrypt.gensalt(cost))
    app = BasicAuth({"prometheus": hashed})
    checked: list[bytes] = []
    real = bcrypt.checkpw

    def recording(password: bytes, against: bytes) -> bool:
        checked.append(against)
        return real(password, against)

    monkeypatch.setattr(bcrypt, "checkpw", recording)
    assert status_of(app, b"prometheus", b"wrong").startswith("401")
    assert status_of(app, b"nobody", b"wrong").startswith("401")
    known, unknown = checked
    assert known == hashed
    assert unknown[4:7] == hashed[4:7] == b"%02d$" % cost
    assert not real(b"", unknown), "the decoy matches no password"


def web_config(tmp_path: Path, users: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n{users}")
    return path


@pytest.mark.parametrize(
    ("hashed", "words"),
    [
        ("$2b$03$" + "." * 53, "bcrypt cost 3: this exporter accepts 4 to"),
        ("$2b$99$" + "." * 53, "bcrypt cost 99"),
        ("$2b$31$" + "." * 53, "bcrypt cost 31"),
        (f"$2b${BCRYPT_MAX_COST + 1}$" + "." * 53, f"bcrypt cost {BCRYPT_MAX_COST + 1}"),
        # The salt's last character holds bits bcrypt has no room for.
        ("$2b$10$" + "Z" * 53, "is not a valid bcrypt hash"),
    ],
    ids=["cost-3", "cost-99", "cost-31", "above-the-maximum", "salt"],
)
def test_hashes_bcrypt_or_workers_cannot_afford_are_refused_at_start(
    hashed: str, words: str, tmp_path: Path
) -> None:
    with pytest.raises(WebConfigError, match="user 'prometheus'") as raised:
        load_web_config(str(web_config(tmp_path, f"  prometheus: '{hashed}'\n")))
    assert words in str(raised.value)
    assert hashed[7:] not in str(raised.value), "the hash is a secret"


def test_accepted_costs_load(tmp_path: Path) -> None:
    for cost in (COST, BCRYPT_MAX_COST):
        hashed = f"$2y${cost:02d}$" + HASHED.decode()[7:]
        config = load_web_config(str(web_config(tmp_path, f"  a: '{hashed}'\n")))
        assert config.basic_auth_users == {"a": hashed.encode()}


def test_a_user_name_with_a_colon_is_refused(tmp_path: Path) -> None:
    """Basic auth splits user and password at the first colon: such a user never logs in."""
    with pytest.raises(WebConfigError, match="user name 'a:b' contains ':'"):
        load_web_config(str(web_config(tmp_path, f"  'a:b': '{HASHED.decode()}'\n")))
