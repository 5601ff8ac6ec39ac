"""Screenshots of every page of the product (tests/support/product_pages.py's table) at 1440
and 768 px wide, as the lead and as a reviewer, on a fresh demo with a disputed double-review
triage: what docs/screenshots/ holds and the README shows. Each shot is the page's first
screen (the viewport, 900 px high), saved as PNG.

Usage: python scripts/screenshots.py [--out docs/screenshots] [--widths 1440,768]
Needs /usr/bin/chromium (apt-get install -y chromium), never `playwright install`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import ViewportSize, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.support.browsing import ROLES, log_in, open_page, prepared_demo
from tests.support.product_pages import PAGES, page_routes

HEIGHT = 900
#: The README's two pictures: (file, page key, role).
README_SHOTS = (("review.png", "review", "reviewer"), ("dashboard.png", "triage", "lead"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--widths", default="1440,768")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="misstriage-shots-") as tmp:
        folder = Path(tmp)
        paths = page_routes(folder)
        (folder / "demo").mkdir()
        with prepared_demo(folder / "demo") as site, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for width in widths:
                viewport = ViewportSize(width=width, height=HEIGHT)
                for role in ROLES:
                    context = log_in(browser, site, role)
                    for entry in PAGES:
                        if entry.anonymous:
                            continue
                        page = open_page(context, entry, role, site, paths, viewport=viewport)
                        page.screenshot(path=args.out / f"{entry.key}-{role}-{width}.png")
                        page.close()
                    context.close()
                anonymous = log_in(browser, site, "anonymous")
                for entry in PAGES:
                    if entry.anonymous:
                        page = open_page(
                            anonymous, entry, "anonymous", site, paths, viewport=viewport
                        )
                        page.screenshot(path=args.out / f"{entry.key}-{width}.png")
                        page.close()
                anonymous.close()
            for name, key, role in README_SHOTS:
                shot = args.out / f"{key}-{role}-1440.png"
                if shot.exists():
                    (args.out / name).write_bytes(shot.read_bytes())
            browser.close()
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
