"""Helper for the report tests (no tests here): a tiny Chrome DevTools Protocol client over
``--remote-debugging-pipe`` (no websocket library needed).

Used by the report tests to open a generated page in headless Chromium and read back console
errors, exceptions and the state of every <img>, or measure its layout at a window width and
take a screenshot of the whole page (``layout_and_screenshot``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time

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
        import select
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
        except Exception:  # noqa: BLE001
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        os.close(self._w)
        shutil.rmtree(self.profile, ignore_errors=True)


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
#: image and <pre> whose right edge passes the page's width (none should: a wide element
#: scrolls inside its own box, the page never scrolls sideways).
_LAYOUT_JS = """
(() => {
  const page = document.documentElement.clientWidth;
  const over = [];
  for (const el of document.querySelectorAll('table, figure, img, pre, svg, section, main')) {
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
    import base64
    b = PipeBrowser(executable)
    try:
        target = b.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = b.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        b.send("Page.enable", session=session)
        b.send("Emulation.setDeviceMetricsOverride",
               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
               session=session)
        b.send("Page.navigate", {"url": url}, session=session)
        b.wait_event("Page.loadEventFired")
        res = b.send("Runtime.evaluate", {"expression": _LAYOUT_JS, "returnByValue": True},
                     session=session)
        out = json.loads(res["result"]["value"])
        shot = b.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": out["height"], "scale": 1}},
            session=session)
        out["png"] = base64.b64decode(shot["data"])
        return out
    finally:
        b.close()
