"""The HTML report as a browser shows it, at the sizes a laptop or a desktop screen shows
(1366x768, 1920x1080): headless Chromium lays the page out and a script measures it. Skipped
where no Chromium binary is installed (Debian: ``apt-get install chromium``)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest

pytest.importorskip("matplotlib")

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                               "google-chrome-stable")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH to "
                                "render the report headless (apt-get install chromium)")

MEASURE = """<script>
window.addEventListener('load', () => {
  const top = el => el.getBoundingClientRect().top + window.scrollY;
  const bottom = el => el.getBoundingClientRect().bottom + window.scrollY;
  const caps = [...document.querySelectorAll('caption')];
  const tg = caps.find(c => c.textContent === 'Targets');
  const imgs = [...document.images].map(i => ({
    w: i.getBoundingClientRect().width, natural: i.naturalWidth, top: top(i),
    drawn_in: parseFloat(i.dataset.widthIn), font_pt: parseFloat(i.dataset.minFontPt)}));
  const named = [...document.querySelectorAll('h1,h2,h3,caption')]
    .filter(e => e.textContent.trim() === 'Targets').length;
  document.body.setAttribute('data-measure', JSON.stringify({
    client_w: document.documentElement.clientWidth,
    scroll_w: document.documentElement.scrollWidth, view_h: window.innerHeight,
    targets_top: tg ? top(tg.parentElement) : null,
    targets_bottom: tg ? bottom(tg.parentElement) : null, targets_named: named, imgs}));
});
</script>"""


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    from _report_res import synthetic_results
    from neuract.eval import write_report
    from neuract.pipeline.report import build_report

    out = tmp_path_factory.mktemp("report")
    intro = ("Twin data: 0.6 min of so101 telemetry, 1 unit, tasks free, push (training and "
             "test); 3 training / 1 test episodes (split by episode).")
    _, htm = write_report(out, build_report(synthetic_results(), "NeuralActuator "
                                            "on the SO-101 twin", intro))
    page = out / "measured.html"
    page.write_text(htm.read_text().replace("</body>", MEASURE + "</body>"))
    return page


def _measure(page, size: tuple[int, int], profile) -> dict:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    m = re.search(r'data-measure="([^"]*)"', dom)
    assert m, f"the page was not measured; chromium printed {dom[-500:]!r}"
    return json.loads(html.unescape(m.group(1)))


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)])
def test_report_reads_at_laptop_and_desktop_sizes(report_html, size, tmp_path):
    from neuract.eval.figures import CSS_PX_PER_IN, SMALL_FONT_PT

    m = _measure(report_html, size, tmp_path / "profile")
    assert m["scroll_w"] <= m["client_w"], "the page scrolls sideways"
    assert m["imgs"], "no figure"
    for im in m["imgs"]:
        assert im["natural"] > 0  # decoded
        assert im["w"] <= m["client_w"]
        # shown at the width it was drawn for: its smallest text keeps its size
        scale = im["w"] / (im["drawn_in"] * CSS_PX_PER_IN)
        assert scale == pytest.approx(1.0, abs=0.01)
        assert round(im["font_pt"] * scale, 1) >= SMALL_FONT_PT  # to the CSS pixel
    # the headline first: the targets table, within the first screen, above every figure
    assert m["targets_named"] == 1
    assert m["targets_top"] is not None
    assert m["targets_bottom"] <= m["view_h"]
    assert m["targets_bottom"] < min(im["top"] for im in m["imgs"])
