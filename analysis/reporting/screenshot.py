"""The annotated picture of docs/report.md, drawn from a real report page.

``python -m analysis.reporting.screenshot [REPORT.html] [-o docs/img/report_annotated.png]``
opens the page in headless Chromium (:mod:`analysis.reporting.browser`) at a laptop's width,
takes a screenshot from the top of the page to the end of its first task's section, and marks
each part with the number docs/report.md's "How to read it" gives it (0 = the claims, 1 =
prediction and outcome, ... 6 = distance between positional encodings) in a margin on the
left. The markers are placed where the page's own headings are (measured in the page), so the
picture follows the template. The default page is ``reports/report.html``, what ``make demo``
writes.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from analysis.reporting.browser import Page, find_chromium

__all__ = ["PARTS", "part_positions", "annotate", "main"]

#: The numbers docs/report.md gives the parts of the page, by the start of their heading.
PARTS = [("Claims about the papers", 0), ("Prediction and outcome", 1), ("Program", 2),
         ("Accuracy by length", 3), ("Compiled model", 4), ("Attention", 5),
         ("Distance between positional encodings", 6)]

#: Headings of the claims box and of the first task's section, with their top in CSS pixels,
#: the finding under the title, and the bottom of the first task's section.
_POSITIONS_JS = """
(() => {
  const y = el => el.getBoundingClientRect().top + window.scrollY;
  const heads = [];
  const claims = document.querySelector('#claims h2');
  if (claims) heads.push([claims.innerText, y(claims)]);
  const sec = document.querySelector('section.task');
  if (sec) for (const h of sec.querySelectorAll('h3')) heads.push([h.innerText, y(h)]);
  const finding = document.querySelector('#finding');
  return {heads: heads, finding: finding ? [y(finding), finding.getBoundingClientRect().height]
                                           : null,
          end: sec ? sec.getBoundingClientRect().bottom + window.scrollY + 12
                   : document.documentElement.scrollHeight};
})()
"""


def part_positions(heads: list[list]) -> list[tuple[int, float]]:
    """(number, top in CSS pixels) of each part of the page found among ``heads`` ((heading
    text, top) pairs, as the page lists them), in the page's order; a part appears once."""
    out, seen = [], set()
    for text, top in heads:
        for start, number in PARTS:
            if text.strip().startswith(start) and number not in seen:
                seen.add(number)
                out.append((number, float(top)))
                break
    return out


def annotate(png: bytes, parts: list[tuple[int, float]], finding: tuple | None,
             width: int = 760, margin: int = 56):
    """The screenshot scaled to ``width`` pixels plus a ``margin`` on the left, with a
    numbered disc at each part's heading and an "F" at the finding; returns a PIL image."""
    # start-up: PIL and matplotlib load only when this runs
    from PIL import Image, ImageDraw, ImageFont
    from matplotlib import font_manager

    shot = Image.open(io.BytesIO(png)).convert("RGB")
    scale = width / shot.width
    shot = shot.resize((width, round(shot.height * scale)), Image.LANCZOS)
    img = Image.new("RGB", (width + margin, shot.height), "white")
    img.paste(shot, (margin, 0))
    draw = ImageDraw.Draw(img)
    font = ImageFont.truetype(font_manager.findfont("DejaVu Sans:bold"), 22)
    marks = [(str(n), top) for n, top in parts]
    if finding:
        marks.append(("F", finding[0]))
    r = 19
    for label, top in marks:
        cy = max(r + 2, round(top * scale) + 10)
        cx = margin // 2
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill="#9b1c31")
        draw.text((cx, cy), label, fill="white", font=font, anchor="mm")
        draw.line((cx + r, cy, margin + 6, cy), fill="#9b1c31", width=3)
    return img


def main(argv: list[str] | None = None) -> int:

    ap = argparse.ArgumentParser(prog="python -m analysis.reporting.screenshot",
                                 description=__doc__.split("\n\n")[1])
    ap.add_argument("report", nargs="?", default="reports/report.html",
                    help="the report page (default: reports/report.html, from `make demo`)")
    ap.add_argument("-o", "--out", default="docs/img/report_annotated.png",
                    help="the PNG to write (default: docs/img/report_annotated.png)")
    ap.add_argument("--window", type=int, default=1280,
                    help="browser window width in CSS pixels (default 1280, a laptop's)")
    ap.add_argument("--width", type=int, default=760,
                    help="width of the page in the picture, in pixels (default 760)")
    args = ap.parse_args(argv)
    page_path = Path(args.report)
    if not page_path.is_file():
        print(f"error: no report page at {page_path}; run `make demo` (or `rasp report`) "
              "first, or name a report.html", file=sys.stderr)
        return 2
    exe = find_chromium()
    if not exe:
        print("error: chromium is required (`make chromium` installs Debian's package)",
              file=sys.stderr)
        return 2
    with Page(exe, page_path.resolve().as_uri(), width=args.window) as page:
        pos = page.eval(_POSITIONS_JS)
        parts = part_positions(pos["heads"])
        if not parts:
            print(f"error: {page_path} has none of the report's headings (is it a report "
                  "page of `rasp report`?)", file=sys.stderr)
            return 2
        png = page.screenshot(int(pos["end"]))
    img = annotate(png, parts, pos["finding"], width=args.width)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out, optimize=True)
    print(f"{out}: {img.width} x {img.height} px, parts "
          f"{', '.join(str(n) for n, _ in parts)} marked, from {page_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
