"""The HTML report opens in headless Chromium (Debian's chromium, which `make test`
installs) with no server: every figure decodes to a picture of non-zero size and
nothing goes wrong on the page."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

# Added to a copy of the page only (the report has no script of its own): it records
# errors (a resource that fails to load or decode fires an "error" event) and console
# errors, then writes every image's decoded size into the DOM for --dump-dom.
PROBE = """<script>
var isrlabErrors = [];
window.addEventListener('error', function (e) { isrlabErrors.push(String(e.message || (e.target && e.target.tagName))); }, true);
console.error = (function (original) { return function () {
  isrlabErrors.push('console: ' + Array.from(arguments).join(' ')); original.apply(console, arguments); }; })(console.error);
window.addEventListener('load', function () {
  var images = Array.from(document.images).map(function (i) { return [i.complete, i.naturalWidth, i.naturalHeight, i.alt]; });
  var pre = document.createElement('pre'); pre.id = 'isrlab-probe';
  pre.textContent = JSON.stringify({images: images, errors: isrlabErrors, title: document.title});
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no chromium: `make test` installs Debian's chromium package")


def test_the_html_report_shows_its_figures_in_headless_chromium(jepsen_report, tmp_path):
    browser = _chromium()
    page = jepsen_report.html.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page), "the report must not load anything from outside"
    probe = tmp_path / "probed.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                           "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    match = re.search(r'<pre id="isrlab-probe">(.*?)</pre>', done.stdout, re.DOTALL)
    assert match, done.stderr[-2000:]
    result = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                        .replace("&gt;", ">"))
    assert result["errors"] == []
    alts = [alt for _, _, _, alt in result["images"]]
    assert alts == ["anomaly probability by configuration", "latency distribution by configuration",
                    "time without a leader"]
    for complete, width, height, alt in result["images"]:
        assert complete and width > 100 and height > 100, alt
    assert result["title"].startswith("isrlab sweep report")
