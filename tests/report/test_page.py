"""The memory plan's page opened in a real browser (headless Chromium): the number of block bars
and the peak label drawn, the page's script run, nothing loaded from the network; and the SVG."""
from __future__ import annotations

import json
import re
import xml.dom.minidom

import browser
import models
import pytest
from conftest import cache_at

import jitflow
from jitflow import cli


@pytest.fixture(scope="module")
def reports(zig_cache, shared_cache):
    why = browser.missing()
    if why:
        if browser.required_in_ci():
            pytest.fail(f"the page must be opened in a browser in CI: {why}")
        pytest.skip(why)
    with cache_at(shared_cache, zig_cache):
        yield {"mlp": jitflow.compile(models.mlp(), "c").inspect(),
               "graph": jitflow.compile(models.convnet(), "cuda", arch="sm_90",
                                        pass_config={"relax.backend.use_cuda_graph": True}).inspect()}


def _bars(dom: str) -> list[str]:
    return re.findall(r'<rect class="block[^"]*"', dom)


def test_the_page_draws_each_block_and_the_peak(reports, tmp_path):
    rep = reports["mlp"]
    page = tmp_path / "mlp.html"
    rep.html(str(page))
    html = page.read_text()
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    dom = browser.dump_dom(page)
    assert len(_bars(dom)) == len(rep.model.function("main").storages) == 3
    assert re.findall(r'<text class="peak-label"[^>]*>([^<]*)</text>', dom) == ["peak 1024 B (1.0 KiB)"]
    assert '<p id="status">drawn: 3 blocks; peak 1024 B (1.0 KiB)</p>' in dom      # the script ran


def test_diff_page_has_both_plans_on_one_scale(reports, tmp_path, capsys, monkeypatch):
    path = tmp_path / "conv.py"
    path.write_text("import models\nconv = models.convnet()\n")
    page = tmp_path / "diff.html"
    assert cli.main(["inspect", "--diff", f"{path}:conv", f"{path}:conv", "--arch", "sm_90",
                     "--b-pass-config", "relax.backend.use_cuda_graph=true", "--html", str(page)]) == 1
    dom = browser.dump_dom(page)
    assert len(_bars(dom)) == 3 + 3 and len(re.findall(r'class="block cached"', dom)) == 2
    assert re.findall(r'<text class="peak-label"[^>]*>([^<]*)</text>', dom) == ["peak 20480 B (20.0 KiB)",
                                                                                  "peak 80 B"]
    assert "a: main: one call" in dom and "b: main: one call" in dom


def test_a_page_and_timeline_at_a_shape_say_which(reports, tmp_path, capsys):
    """--shape n=32 with --html and --timeline: the page's title and header, its text, and the
    timeline say n = 32 (the header names n by the caller's argument, x.shape[0])."""
    path = tmp_path / "model.py"
    path.write_text("import models\nsym = models.symbolic_mlp()\n")
    page, timeline = tmp_path / "plan.html", tmp_path / "plan.json"
    assert cli.main(["inspect", f"{path}:sym", "--target", "c", "--shape", "n=32", "--html", str(page),
                     "--timeline", str(timeline)]) == 0
    dom = browser.dump_dom(page)
    title = re.search(r"<title>([^<]*)</title>", dom).group(1)
    assert re.fullmatch(r"jitflow inspect: [0-9a-f]{12} at n = 32", title)
    assert f"<h1>{title}</h1>" in dom and "symbols: n = 32 (x.shape[0])" in dom and "lv.shape" not in dom
    assert '<p id="status">drawn: 3 blocks; peak 2048 B (2.0 KiB)</p>' in dom
    doc = json.loads(timeline.read_text())
    assert doc["otherData"]["shape"] == {"n": 32}
    assert cli.main(["inspect", "--diff", f"{path}:sym", f"{path}:sym", "--target", "c", "--shape", "n=32",
                     "--html", str(page)]) == 0
    assert re.search(r"<title>([^<]*)</title>", browser.dump_dom(page)).group(1).endswith(" at n = 32")
    capsys.readouterr()


def test_svg_is_one_image(reports):
    svg = reports["graph"].svg()
    doc = xml.dom.minidom.parseString(svg)          # well-formed XML, as an image file must be
    assert doc.documentElement.tagName == "svg"
    assert len(doc.getElementsByTagName("rect")) == 1 + 3       # the background and the blocks


def test_two_plans_in_one_svg_share_one_scale(reports):
    from jitflow.report import plans_svg

    svg = plans_svg([("fused", reports["mlp"]), ("graph", reports["graph"])])
    doc = xml.dom.minidom.parseString(svg)
    titles = [t.firstChild.data for t in doc.getElementsByTagName("text") if t.getAttribute("class") == "title"]
    assert titles == ["fused: main: one call", "graph: main: one call"]
    peaks = [float(line.getAttribute("y1")) for line in doc.getElementsByTagName("line")]
    assert len(peaks) == 2 and len(doc.getElementsByTagName("polyline")) == 2
