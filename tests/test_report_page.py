"""The plan's web page and the reproductions' pages, opened in a real headless Chromium; the
drawing's layouts at scale; progress that never mixes with JSON."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import time

import numpy as np
import pytest
from browser import CHROMIUM, Browser
from PIL import Image

import netweave
from conftest import BIN, run_cli
from netweave.report import drawing, html_page

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make setup installs it)")


def _painted(png: bytes) -> float:
    """Share of a screenshot's pixels that are not (near) white: 0 for an empty box."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return float((pixels < 235).mean()) if pixels.size else 0.0


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def torus_plan(tmp_path_factory):
    """plan --out on a 4x4 torus with a placed stencil: every section of the page."""
    tmp = tmp_path_factory.mktemp("page")
    run_cli("topo", "torus", "--dims", "4x4", "-o", str(tmp / "t.json"))
    out = tmp / "plan"
    run_cli("plan", str(tmp / "t.json"), "--out", str(out), "--pattern", "stencil:4x4", "--map-evals", "300")
    return out


@needs_chromium
def test_the_plan_page_shows_the_fabric_heat_map_and_candidates(browser, torus_plan):
    page = browser.open((torus_plan / "index.html").as_uri())
    report = json.loads((torus_plan / "report.json").read_text())
    topo = netweave.topology.load(torus_plan / "topology.json")
    switch_links = sum(1 for a, _, b, _ in topo.link_array() if not topo.is_host(int(a)) and not topo.is_host(int(b)))
    # The fabric: one line or arc per switch-to-switch link, one dot per router.
    assert page.evaluate("document.querySelectorAll('#fabric g.links > *').length") == switch_links
    assert page.evaluate("document.querySelectorAll('#fabric g.nodes > circle').length") == topo.num_switches
    # The candidate chart: one bar per timed schedule, the table one row per candidate and skip.
    timed = len(report["schedules"]) + len(report["dag_schedules"]) + len(report["native"])
    assert page.evaluate("document.querySelectorAll('#candidates-chart rect.bar').length") == timed
    assert page.evaluate("document.querySelectorAll('#candidates-table tr').length") == 1 + timed + len(report["skipped"])
    # The heat map starts on the pick, or netweave's own pick when the user's MPI is predicted
    # best; every drawn link carries flows in some colour.
    phased = {s["name"] for s in report["schedules"]}
    best = report["best"]["name"] if report["best"]["name"] in phased else report["ours"]["name"]
    assert page.evaluate("document.getElementById('heat-select').value") == best
    strokes = page.evaluate("[...document.querySelectorAll('#heatmap g.links > *')].map(e => e.getAttribute('stroke'))")
    assert len(strokes) == switch_links and all(s.startswith("#") for s in strokes)
    assert page.evaluate("document.getElementById('heat-caption').textContent").startswith(best)
    # Choosing shift recolours the drawing from the page's own data: shift is contended on a
    # torus, so its busiest link turns red where the best schedule's were not all red.
    assert report["schedules"][0]["name"] == "shift" and report["schedules"][0]["max_congestion"] > 1
    page.evaluate("(() => { const s = document.getElementById('heat-select'); s.value = 'shift';"
                  " s.dispatchEvent(new Event('change')); })()")
    recoloured = page.evaluate("[...document.querySelectorAll('#heatmap g.links > *')].map(e => e.getAttribute('stroke'))")
    assert "#d7191c" in recoloured and recoloured != strokes
    assert page.evaluate("document.getElementById('heat-caption').textContent").startswith("shift")
    # Routing and placement sections, and the commands behind the figures.
    assert page.evaluate("document.querySelectorAll('#hops-histogram rect.bar').length") >= 2
    assert page.evaluate("document.querySelectorAll('#placement-section svg.fabric').length") == 2
    commands = page.evaluate("[...document.querySelectorAll('pre.cmd')].map(e => e.textContent).join('\\n')")
    assert "netweave plan" in commands and "netweave route check" in commands and "netweave map" in commands
    # What the browser painted: each figure is a box with ink in it.
    for selector in ("#fabric", "#heatmap", "#candidates-chart"):
        assert _painted(page.screenshot(selector)) > 0.01, selector
    assert page.errors() == []


@needs_chromium
def test_the_browser_check_catches_a_broken_page(browser, tmp_path):
    # The check above could fail: a page whose script throws and logs an error is caught.
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><div id='x'></div><script>console.error('boom');"
                      "undefined_function();</script></body></html>")
    page = browser.open(broken.as_uri())
    errors = page.errors()
    assert any("boom" in e for e in errors) and any("undefined_function" in e for e in errors)
    assert _painted(page.screenshot("#x")) == 0.0


def test_the_page_is_self_contained(torus_plan):
    # Nothing is fetched at view time: no external script, style sheet, image or font.
    text = (torus_plan / "index.html").read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert "<script src" not in text and "<link" not in text


def test_the_deployable_files_are_listed_on_the_page(torus_plan):
    text = (torus_plan / "index.html").read_text()
    for name in ("routes.json", "opensm-lfts.dump", "alltoall-16.nws", "rankfile"):
        assert f"<code>{name}</code>" in text, name


@pytest.mark.parametrize("builder, expect", [
    (lambda: netweave.topology.latin_square_fat_tree(17), "hosts are not drawn"),
    (lambda: netweave.topology.torus([32, 32, 32], 1), "grouped in blocks"),
])
def test_drawings_stay_readable_at_scale(builder, expect):
    # LSFT q=17 (5,526 hosts) and a 32^3 torus: at most LINK_LIMIT lines, and the page says
    # what it aggregated.
    topo = builder()
    d = drawing.layout(topo)
    assert len(d.segments) <= drawing.LINK_LIMIT
    assert any(expect in n for n in d.notes)
    # Every switch-to-switch channel is still shown: drawn in a line or folded into a dot.
    shown = {c for s in d.segments for c in s.channels} | {c for n in d.nodes for c in n.folded}
    switch_channels = {2 * i + k for i, (a, _, b, _) in enumerate(topo.link_array())
                       if not topo.is_host(int(a)) and not topo.is_host(int(b)) for k in (0, 1)}
    assert shown == switch_channels


@pytest.mark.parametrize("builder, kind", [
    (lambda: netweave.topology.mesh([4, 4], 1), "grid"),
    (lambda: netweave.topology.k_ary_n_tree(2, 3), "layered"),
    (lambda: netweave.topology.dragonfly(4, 2, 2, None, "absolute"), "circular"),
])
def test_each_structure_gets_its_layout(builder, kind):
    topo = builder()
    d = drawing.layout(topo)
    assert d.kind == kind
    switches = {int(s) for s in topo.switches}
    assert {m for n in d.nodes if not n.is_host for m in n.members} == switches
    # Every dot inside the drawing's box.
    assert all(0 <= n.x <= drawing.WIDTH and 0 <= n.y <= d.height for n in d.nodes)


def test_a_reproduction_page_inlines_its_figures(tmp_path):
    # summary.md with a linked figure and one it does not mention: both end up inline.
    png = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 30, 30)).save(png, "PNG")
    (tmp_path / "linked.png").write_bytes(png.getvalue())
    (tmp_path / "other.png").write_bytes(png.getvalue())
    page = html_page.markdown_page("# Paper\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n![fig](linked.png)\n",
                                     tmp_path, "paper")
    assert "<table>" in page and "<h1>Paper</h1>" in page
    assert page.count("data:image/png;base64,") == 2 and "linked.png\"" not in page


def _in_a_terminal(*args: str, timeout: float = 300) -> str:
    """Run netweave with stdout and stderr on a pseudo-terminal; everything it wrote."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([str(BIN / "netweave"), *args], stdin=terminal, stdout=terminal, stderr=terminal,
                            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"}, close_fds=True)
    os.close(terminal)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # the terminal closed: the command ended
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                break
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait()
        os.close(controller)
    return b"".join(chunks).decode(errors="replace")


def test_progress_shows_on_a_terminal_and_never_in_json(tmp_path):
    # A plan long enough to draw its bar: a 6x6 torus with several candidates.
    run_cli("topo", "torus", "--dims", "6x6", "-o", str(tmp_path / "t.json"))
    shown = _in_a_terminal("plan", str(tmp_path / "t.json"))
    assert "\x1b[" in shown and "%" in shown  # the bar: escape sequences and a percentage
    as_json = _in_a_terminal("plan", str(tmp_path / "t.json"), "--json")
    assert "\x1b" not in as_json
    assert json.loads(as_json.replace("\r\n", "\n"))["job"]["ranks"] == 36
    quiet = _in_a_terminal("plan", str(tmp_path / "t.json"), "--quiet")
    assert "\x1b" not in quiet and "best" in quiet
    # On a pipe: nothing on stderr at all.
    assert run_cli("plan", str(tmp_path / "t.json")).stderr == ""
