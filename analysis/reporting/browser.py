"""Headless Chromium for the report: a tiny Chrome DevTools Protocol client over
``--remote-debugging-pipe`` (no websocket library needed).

The report tests open a generated page with it and read back console errors, exceptions and
the state of every <img> (:func:`open_page`), measure its layout at a window width and take a
screenshot of the whole page (:func:`layout_and_screenshot`), or evaluate JavaScript and click
in it as a reader would (:class:`Page`); ``python -m analysis.reporting.screenshot`` draws the
annotated picture of docs/report.md with it. Chromium: ``make chromium`` (Debian's package).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import base64
import select

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--remote-debugging-pipe"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class PipeBrowser:
    def __init__(self, executable: str, timeout: float = 60.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="rasp-report-chromium-")
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()
        # Chromium reads commands from fd 3 and writes replies to fd 4.
        def _setup():
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)
        self.proc = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_setup, close_fds=False)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        mid = self._id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == mid:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        deadline = time.time() + (timeout or self.timeout)
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        while True:
            ev = self._read_message(deadline)
            self.events.append(ev)
            if ev.get("method") == method:
                return ev

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:  # noqa: BLE001 - best effort: a dead browser is killed below
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        os.close(self._w)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One page in headless Chromium at a window size, for a ``with`` block: evaluate
    JavaScript in it (:meth:`eval`), click at a point as a mouse would (:meth:`click`), take a
    screenshot (:meth:`screenshot`)."""

    def __init__(self, executable: str, url: str, width: int = 1280, height: int = 800):
        self.browser = PipeBrowser(executable)
        self.width = width
        try:
            target = self.browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.browser.send("Target.attachToTarget",
                                             {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1,
                       "mobile": False})
            self.send("Page.navigate", {"url": url})
            self.browser.wait_event("Page.loadEventFired")
        except BaseException:          # any failure, Ctrl-C included: close Chromium, re-raise
            self.browser.close()
            raise

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, session=self.session)

    def eval(self, expression: str):
        """The value of a JavaScript expression (JSON-able values come back as Python's)."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"JavaScript error: {res['exceptionDetails']}")
        return res["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A left click at (x, y) in the window (CSS pixels), pressed and released."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                   "button": "left", "clickCount": 1})

    def screenshot(self, height: int | None = None) -> bytes:
        """PNG bytes of the page from its top, ``height`` CSS pixels tall (default: all)."""
        if height is None:
            height = self.eval("document.documentElement.scrollHeight")
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}})
        return base64.b64decode(shot["data"])

    def __enter__(self) -> "Page":
        return self

    def __exit__(self, *exc) -> None:
        self.browser.close()


def open_page(executable: str, url: str) -> dict:
    """Load ``url`` and return {"errors": [...], "images": [[complete, naturalWidth, src]], "text"}."""
    b = PipeBrowser(executable)
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            b.send(domain, session=session)
        b.send("Page.navigate", {"url": url}, session=session)
        b.wait_event("Page.loadEventFired")
        res = b.send("Runtime.evaluate", {
            "expression": "JSON.stringify({images: Array.from(document.images).map("
                          "i => [i.complete, i.naturalWidth, i.src.slice(0, 30)]),"
                          " text: document.body.innerText})",
            "returnByValue": True}, session=session)
        page = json.loads(res["result"]["value"])
        errors = []
        for ev in b.events:
            m, p = ev.get("method"), ev.get("params", {})
            if m == "Runtime.exceptionThrown":
                errors.append(p.get("exceptionDetails", {}).get("text", "exception"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(str(p.get("args")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(p["entry"].get("text", "error"))
        page["errors"] = errors
        return page
    finally:
        b.close()


#: The page's layout at the window's width: the document's widths and every table, figure,
#: image, <pre> and scrolling box whose right edge passes the page's width (none should: a wide
#: element scrolls inside its own box, the page never scrolls sideways; an element inside such
#: a box is measured by the box).
_LAYOUT_JS = """
(() => {
  const page = document.documentElement.clientWidth;
  const over = [];
  // an element inside a box that scrolls (a diagram at full size) is measured by that box
  const scrolled = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement)
      if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) return true;
    return false;
  };
  for (const el of document.querySelectorAll('table, figure, img, pre, svg, section, main, .scroll')) {
    if (scrolled(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > page + 0.5 || r.left < -0.5)
      over.push([el.tagName.toLowerCase(), Math.round(r.left), Math.round(r.right),
                 (el.className || '') + ' ' + (el.innerText || el.alt || '').slice(0, 60)]);
  }
  return JSON.stringify({page: page, scrollWidth: document.documentElement.scrollWidth,
                         bodyScrollWidth: document.body.scrollWidth,
                         height: document.documentElement.scrollHeight,
                         counts: {table: document.querySelectorAll('table').length,
                                  figure: document.querySelectorAll('figure').length,
                                  img: document.images.length},
                         overflowing: over});
})()
"""


def layout_and_screenshot(executable: str, url: str, width: int = 1280,
                          height: int = 800) -> dict:
    """Load ``url`` in a ``width`` x ``height`` window and return the layout measured in the
    page (``_LAYOUT_JS``: page / scroll widths, document height, element counts, overflowing
    elements) plus ``png``: a screenshot of the whole page (PNG bytes, ``width`` wide)."""
    with Page(executable, url, width, height) as page:
        out = json.loads(page.eval(_LAYOUT_JS))
        out["png"] = page.screenshot(out["height"])
        return out
