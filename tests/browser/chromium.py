"""Headless Chromium through Selenium and Debian's chromium-driver, and screenshot checks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image, ImageStat
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.conftest import require_binary

# As root in a container: no sandbox, nothing that phones home or updates itself.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
DESKTOP = (1280, 900)
PHONE = (390, 844)


@contextmanager
def chromium(profile: Path) -> Iterator[WebDriver]:
    """A fresh headless Chromium with its own profile folder; quit on exit."""
    options = Options()
    options.binary_location = require_binary("chromium")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,900"):
        options.add_argument(flag)
    service = Service(
        executable_path=require_binary("chromedriver"),
        log_output=str(profile.with_suffix(".chromedriver.log")),
    )
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def set_viewport(driver: WebDriver, width: int, height: int, *, mobile: bool) -> None:
    """Emulate a screen size; `mobile` also honours the page's viewport meta tag."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )


def full_page_screenshot(driver: WebDriver, path: Path, width: int, *, mobile: bool) -> Path:
    """The whole page at this width, not only what fits in the window."""
    set_viewport(driver, width, 600, mobile=mobile)
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    set_viewport(driver, width, min(height, 8000), mobile=mobile)
    driver.save_screenshot(str(path))
    return path


def assert_not_blank(path: Path) -> None:
    """A real page has text and colours: enough pixels differ from the background."""
    with Image.open(path) as image:
        image.load()
        grey = image.convert("L")
        width, height = grey.size
        assert width > 100, f"{path}: {width} pixels wide"
        assert height > 100, f"{path}: {height} pixels high"
        (deviation,) = ImageStat.Stat(grey).stddev
        assert deviation > 10, f"{path}: almost uniform (grey level deviation {deviation:.1f})"
        colours = grey.getcolors(maxcolors=256 * 256) or []
        assert len(colours) > 16, f"{path}: only {len(colours)} grey levels"
