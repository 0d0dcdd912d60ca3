"""The status page in a real headless Chromium, served by the real `serve --snapshot`."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from exporter.report.advice import suggestion
from exporter.report.overview import select
from exporter.run.oneshot import evaluate_snapshot
from exporter.sources.snapshot import load_snapshot
from tests.browser.chromium import (
    DESKTOP,
    PHONE,
    assert_not_blank,
    chromium,
    full_page_screenshot,
    set_viewport,
)
from tests.conftest import EXAMPLES_DIR
from tests.processes import serving

pytestmark = pytest.mark.browser

DEMO = EXAMPLES_DIR / "demo-cluster.json"
MARKUP_ANNOTATION = "<img src=x onerror=alert(1)>"
MARKUP_FIELD = '"><script>alert(2)</script>'
# Records every alert() a page would show, before the page's own code runs.
ALERT_TRAP = "window.__alerts = []; window.alert = (text) => window.__alerts.push(String(text));"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`serve --snapshot` on the demo cluster; the base URL."""
    log = tmp_path_factory.mktemp("exporter") / "exporter.log"
    with serving("--snapshot", str(DEMO), log=log) as exporter:
        yield exporter.url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium") / "profile") as driver:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ALERT_TRAP})
        yield driver


@pytest.fixture(autouse=True)
def desktop(browser: WebDriver) -> None:
    set_viewport(browser, *DESKTOP, mobile=False)


def open_page(driver: WebDriver, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def table_rows(driver: WebDriver) -> list[dict[str, str]]:
    """The Service table as {column title: first line of the cell}, one dict per row."""
    table = driver.find_element(By.CSS_SELECTOR, "table.services")
    titles = [th.text.strip().lower() for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    rows = []
    for row in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
        cells: list[WebElement] = row.find_elements(By.CSS_SELECTOR, "th, td")
        rows.append(
            {
                title: cell.text.strip().split("\n")[0]
                for title, cell in zip(titles, cells, strict=True)
            }
        )
    return rows


def test_table_lists_every_service_with_its_verdict(browser: WebDriver, demo: str) -> None:
    """Each Service of the snapshot is a row, with the verdict `evaluate` gives it."""
    expected = {
        (verdict.service.namespace, verdict.service.name): str(verdict.expected_state)
        for verdict in evaluate_snapshot(load_snapshot(str(DEMO))).verdicts()
    }
    open_page(browser, demo + "/")
    shown = {(row["namespace"], row["name"]): row["verdict"] for row in table_rows(browser)}
    assert shown == expected
    first = table_rows(browser)[0]
    assert first["verdict"] == "disabled", "problems sort first"
    summary = browser.find_element(By.ID, "table-summary").text
    assert f"of {len(expected)}" in summary


def test_filters_narrow_the_table(browser: WebDriver, demo: str) -> None:
    """Choosing a verdict, or typing text, leaves only the matching Services."""
    open_page(browser, demo + "/")
    Select(browser.find_element(By.ID, "filter-state")).select_by_value("disabled")
    browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: "state=disabled" in d.current_url)
    rows = table_rows(browser)
    assert rows
    assert {row["verdict"] for row in rows} == {"disabled"}
    assert len(rows) < len(load_snapshot(str(DEMO)).services)

    open_page(browser, demo + "/")
    browser.find_element(By.TAG_NAME, "body").send_keys("/")  # the shortcut to the text filter
    assert browser.switch_to.active_element.get_attribute("id") == "filter-text"
    browser.switch_to.active_element.send_keys("ledger", Keys.ENTER)
    WebDriverWait(browser, 10).until(lambda d: "q=ledger" in d.current_url)
    assert [(row["namespace"], row["name"]) for row in table_rows(browser)] == [
        ("payments", "ledger")
    ]


def test_service_link_opens_its_page_with_the_zone_table(browser: WebDriver, demo: str) -> None:
    open_page(browser, demo + "/")
    browser.find_element(By.LINK_TEXT, "ledger").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/services/payments/ledger"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Service payments/ledger"
    zones = browser.find_element(By.CSS_SELECTOR, "table.zones")
    header = [th.text.strip().lower() for th in zones.find_elements(By.CSS_SELECTOR, "thead th")]
    assert header[:3] == ["zone", "cpu share", "endpoints"]
    zone_names = [th.text for th in zones.find_elements(By.CSS_SELECTOR, "tbody th[scope=row]")]
    assert zone_names == ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
    main = browser.find_element(By.TAG_NAME, "main").text
    assert "MinAllocationExceedsOverloadThreshold" in main
    assert "scale to 7 or 9 ready endpoints" in main


def test_the_fix_command_is_copied_whole_at_phone_width(browser: WebDriver, demo: str) -> None:
    """The Suggestion's command, as explain prints it: wrapped to a phone's screen, yet one
    click selects it all, with no line break in what is copied."""
    evaluation = evaluate_snapshot(load_snapshot(str(DEMO)))
    (checkout,) = select(evaluation, "payments", "checkout")
    command = suggestion(evaluation.capacity, checkout).command
    assert command is not None
    set_viewport(browser, PHONE[0], PHONE[1], mobile=True)
    open_page(browser, demo + "/services/payments/checkout")
    code = browser.find_element(By.CSS_SELECTOR, "pre.command code")
    assert code.size["width"] <= PHONE[0]
    code.click()
    assert browser.execute_script("return window.getSelection().toString()") == command


def markup_snapshot(path: Path) -> Path:
    """The demo cluster plus shop/markup, whose annotation and field values are markup."""
    snapshot: dict[str, Any] = json.loads(DEMO.read_text())
    items: list[dict[str, Any]] = snapshot["items"]
    service = copy.deepcopy(
        next(i for i in items if i["kind"] == "Service" and i["metadata"]["name"] == "catalog")
    )
    service["metadata"]["name"] = "markup"
    service["metadata"]["annotations"] = {"service.kubernetes.io/topology-mode": MARKUP_ANNOTATION}
    service["spec"]["trafficDistribution"] = MARKUP_FIELD
    labels = "kubernetes.io/service-name"
    slices = [
        copy.deepcopy(i)
        for i in items
        if i["kind"] == "EndpointSlice" and i["metadata"]["labels"][labels] == "catalog"
    ]
    for endpoint_slice in slices:
        endpoint_slice["metadata"]["name"] = endpoint_slice["metadata"]["name"].replace(
            "catalog", "markup"
        )
        endpoint_slice["metadata"]["labels"][labels] = "markup"
    items += [service, *slices]
    path.write_text(json.dumps(snapshot))
    return path


def test_markup_in_annotations_is_shown_as_text_and_runs_nothing(
    browser: WebDriver, tmp_path: Path
) -> None:
    snapshot = markup_snapshot(tmp_path / "markup.json")
    with serving("--snapshot", str(snapshot), log=tmp_path / "exporter.log") as exporter:
        open_page(browser, f"{exporter.url}/?q=markup")
        assert [row["name"] for row in table_rows(browser)] == ["markup"]
        browser.find_element(By.LINK_TEXT, "markup").click()
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/services/shop/markup"))
        text = browser.find_element(By.TAG_NAME, "main").text
        assert MARKUP_ANNOTATION in text
        assert MARKUP_FIELD in text
        assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
        assert len(browser.find_elements(By.TAG_NAME, "script")) == 1  # the page's own
        assert browser.execute_script("return window.__alerts") == []
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018 - reading it is the check


@pytest.mark.parametrize(
    ("page", "path"), [("status-page", "/"), ("status-service", "/services/payments/ledger")]
)
@pytest.mark.parametrize(
    ("device", "width", "mobile"), [("desktop", DESKTOP[0], False), ("phone", PHONE[0], True)]
)
def test_screenshots_are_not_blank_and_fit_the_width(
    browser: WebDriver,
    demo: str,
    tmp_path: Path,
    page: str,
    path: str,
    device: str,
    width: int,
    mobile: bool,  # noqa: FBT001 - a pytest parameter
) -> None:
    """Each page at desktop and phone width: drawn, and never wider than the screen."""
    set_viewport(browser, width, 800, mobile=mobile)
    open_page(browser, demo + path)
    page_width = browser.execute_script("return document.documentElement.scrollWidth")
    assert page_width <= width, "wide tables must scroll inside their region, not the page"
    shot = full_page_screenshot(browser, tmp_path / f"{page}-{device}.png", width, mobile=mobile)
    assert_not_blank(shot)


def test_dark_mode_follows_the_system(browser: WebDriver, demo: str) -> None:
    """prefers-color-scheme: dark gives a dark background and light text."""
    try:
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        open_page(browser, demo + "/")
        background, colour = browser.execute_script(
            "const style = getComputedStyle(document.body);"
            "return [style.backgroundColor, style.color];"
        )
        assert luminance(background) < 0.2, background
        assert luminance(colour) > 0.7, colour
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def luminance(css_colour: str) -> float:
    red, green, blue = (
        int(part) for part in css_colour[css_colour.index("(") + 1 : -1].split(",")[:3]
    )
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def test_keyboard_skips_to_the_content(browser: WebDriver, demo: str) -> None:
    """The first Tab reaches "Skip to content"; Enter moves the focus to the main landmark."""
    open_page(browser, demo + "/")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    skip = browser.switch_to.active_element
    assert skip.get_attribute("class") == "skip"
    assert skip.text == "Skip to content", "visible once focused"
    skip.send_keys(Keys.ENTER)
    WebDriverWait(browser, 10).until(lambda d: d.switch_to.active_element.tag_name == "main")
