"""report.html as a person sees it (issue 34 item 10): a real headless Chromium lays out the report of a run with
failing cases that share a converted model, and a probe script reads the laid-out page.

What it checks: no text of an SVG drawn past the SVG's edge (the profile's legend was cut to "green band: ve"),
every caption and message inside its box, one failure card per distinct result (each naming the cases that share
it). A screenshot of the page is written too, for a person to look at. Skips, saying why, without Chromium
(`apt-get install chromium`); the same properties are checked without a browser in tests/unit/report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium on PATH (apt-get install chromium)")

PROBE = """
<script>
window.addEventListener('load', () => {
  const clipped = [];
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.right > box.right + 0.5 || r.left < box.left - 0.5) clipped.push(t.textContent);
    }
  }
  const overflowing = [...document.querySelectorAll('figcaption, .failure h4, .failure p')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 60));
  const cards = [...document.querySelectorAll('.failure h4 code')].map(e => e.textContent);
  const out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({clipped, overflowing, cards});
  document.body.appendChild(out);
});
</script>
"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


def test_the_report_of_a_failing_run_lays_out_whole_in_chromium(tmp_path: Path) -> None:
    project = tmp_path / "a project"
    project.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--model", "needs_constraints"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 1, run.stdout[-2000:]  # data_max inf overflows: failing cases, by design
    report = json.loads((project / "castguard-report" / "report.json").read_text())
    failing = [c for c in report["cases"] if c["status"] == "fail"]
    distinct = {c.get("reused_from") or c["case_id"] for c in failing}
    assert len(failing) > len(distinct)  # some failing cases share a converted model: the property under test

    page = project / "castguard-report" / "probe.html"
    page.write_text((project / "castguard-report" / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium("--dump-dom", page.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert probe["clipped"] == []
    assert probe["overflowing"] == []
    assert sorted(probe["cards"]) == sorted(distinct)

    shot = tmp_path / "report.png"
    _chromium(
        "--window-size=1400,2400", f"--screenshot={shot}", (project / "castguard-report" / "report.html").as_uri()
    )
    assert shot.is_file() and shot.stat().st_size > 10_000
