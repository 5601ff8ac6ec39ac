"""Screenshots of every page of the product (tests/support/product_pages.py's table) at 1440
and 768 px wide, as the lead and as a reviewer, on a fresh demo with a disputed double-review
triage: what docs/screenshots/ holds (pages/) and the README shows (review.png, and
dashboard.png once every miss of the demo's triage is labelled). Each shot is the page's
first screen (the viewport, 900 px high), as PNG of 64 colours (Pillow).

Usage: python scripts/screenshots.py [--out docs/screenshots] [--widths 1440,768]
Needs /usr/bin/chromium (apt-get install -y chromium), never `playwright install`.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import ViewportSize, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.support.browsing import ROLES, log_in, open_page, prepared_demo
from tests.support.demo_site import DemoSite, api
from tests.support.product_pages import PAGES, page_routes

HEIGHT = 900
#: Colours a shot keeps: a page's flat colours and its text's edges fit, at a third of the
#: size of the full-colour PNG.
COLOURS = 64


def save(png: bytes, path: Path) -> None:
    """Write the screenshot ``png`` to ``path``, reduced to ``COLOURS`` colours."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def label_everything(site: DemoSite) -> None:
    """The reviewer (then the lead, for the misses the shots left leased to the lead) labels
    every miss left in the demo's triage through the API, with the hints' suggestion where
    there is one (what `a` does on the page)."""
    for email in (site.reviewer.email, site.lead.email):
        with api(site.url, site.database, email) as client:
            while True:
                claimed = client.post(f"/triages/{site.triage_id}/claim").raise_for_status()
                if claimed.status_code == 204:
                    break
                miss = claimed.json()
                cause = miss.get("hint") or "not-indexed"
                client.post(
                    f"/misses/{miss['id']}/label",
                    json={"category": cause, "version": miss["version"]},
                ).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--widths", default="1440,768")
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    pages = args.out / "pages"
    pages.mkdir(parents=True, exist_ok=True)
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
                        shot = page.screenshot()
                        save(shot, pages / f"{entry.key}-{role}-{width}.png")
                        if (entry.key, role, width) == ("review", "reviewer", 1440):
                            save(shot, args.out / "review.png")
                        page.close()
                    context.close()
                anonymous = log_in(browser, site, "anonymous")
                for entry in PAGES:
                    if entry.anonymous:
                        page = open_page(
                            anonymous, entry, "anonymous", site, paths, viewport=viewport
                        )
                        save(page.screenshot(), pages / f"{entry.key}-{width}.png")
                        page.close()
                anonymous.close()
            # The README's dashboard: once the reviewer has labelled every miss (it closes).
            label_everything(site)
            context = log_in(browser, site, "lead")
            dashboard = next(entry for entry in PAGES if entry.key == "triage")
            viewport = ViewportSize(width=1440, height=HEIGHT)
            page = open_page(context, dashboard, "lead", site, paths, viewport=viewport)
            save(page.screenshot(), args.out / "dashboard.png")
            context.close()
            browser.close()
    print(f"screenshots in {args.out}")


if __name__ == "__main__":
    main()
