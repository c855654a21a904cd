"""Helper for the report tests (no tests here): headless Chromium over the DevTools protocol,
from :mod:`analysis.reporting.browser` (the screenshot command of docs/report.md uses it too)."""

from analysis.reporting.browser import (Page, PipeBrowser, find_chromium,  # noqa: F401
                                        layout_and_screenshot, open_page)
