"""``misstriage gate --format markdown`` is a pull-request comment: query texts and ids from
the files are inert in it (escaped by the one function of app.exporters.markup). Rendered
by a GFM-like renderer (markdown-it-py's gfm-like preset), hostile texts and ids show as
written, ids exactly in code spans, and no image, link, raw HTML, comment, mention or
reference comes of them."""

from __future__ import annotations

import json
from pathlib import Path

from bs4 import BeautifulSoup
from click.testing import CliRunner

from app.cli import main
from app.exporters.markup import JOINER, one_line
from tests.support.markdown import GFM, HOSTILE, assert_no_references

#: Ids are single tokens in a qrels or run file: hostile where a token can be.
QIDS = ["@team/x", "q|1", "<b>", "#12", "`q`", "!3", "[~alice]", "ENG-12"]
DOCS = [
    "<img/src=x/onerror=alert(1)>",
    "@everyone",
    "![i](https://evil.example/p.png)",
    "d|x",
    "<!--",
    "`t`",
    "https://evil.example",
    "a@b.com",
]
TEXTS = [
    "ping @everyone ![x](https://evil.example/p.png) <!-- the rest of the comment",
    *HOSTILE,
]
ALLOWED = {"h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "code"}


def test_query_texts_and_ids_are_inert_in_the_markdown(tmp_path: Path) -> None:
    pairs = [
        (f"{QIDS[i % len(QIDS)]}-{i}", f"{DOCS[i % len(DOCS)]}-{i}", text)
        for i, text in enumerate(TEXTS)
    ]
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} 1\n" for q, d, _ in pairs))
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, _, t in pairs)
    )
    # every relevant document leaves the top depth
    (tmp_path / "base.trec").write_text("".join(f"{q} Q0 {d} 1 1.0 t\n" for q, d, _ in pairs))
    (tmp_path / "new.trec").write_text("".join(f"{q} Q0 other 1 1.0 t\n" for q, _, _ in pairs))
    args = ["gate", "--qrels", str(tmp_path / "qrels.txt"), "--queries"]
    args += [str(tmp_path / "queries.jsonl"), "--baseline", str(tmp_path / "base.trec")]
    args += ["--run", str(tmp_path / "new.trec"), "--depth", "5", "--k", "1"]
    done = CliRunner().invoke(main, [*args, "--permutations", "50", "--format", "markdown"])
    assert done.exit_code == 1, done.stderr

    html = GFM.render(done.stdout)
    assert "<!--" not in html
    soup = BeautifulSoup(html, "html.parser")
    assert {t.name for t in soup.find_all(True)} <= ALLOWED
    assert soup.find("h2").get_text() == "misstriage gate: FAILED"
    left = soup.find_all("table")[1]
    rows = [row.find_all("td") for row in left.select("tbody tr")]
    assert len(rows) == len(pairs)
    seen = set()
    for cells in rows:
        assert len(cells) == 5
        qid, doc = cells[0].find("code").get_text(), cells[2].find("code").get_text()
        text = cells[1].get_text().replace(JOINER, "").strip()
        seen.add((qid, doc, text))
    # ids exact in their code spans, texts as written (on one line)
    assert seen == {(q, d, one_line(t)) for q, d, t in pairs}
    for node in soup.find_all(string=True):
        if node.parent is not None and node.parent.name != "code":
            assert_no_references(str(node))
