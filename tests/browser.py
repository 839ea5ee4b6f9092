"""A headless Chromium for the dashboard's test and benchmark: Debian's ``chromium`` and
``chromedriver`` driven by selenium (``.ci/run`` installs them), started with the flags a
closed network needs; never a browser a tool downloads itself."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,900")


def missing() -> str | None:
    """Why no browser can be started here (None: one can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    if not (CHROMIUM and CHROMEDRIVER):
        return "chromium and chromedriver are not installed (apt-get install chromium " \
               "chromium-driver)"
    return None


def chromium(profile: Path):
    """A headless Chromium (selenium WebDriver) with its profile in ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
