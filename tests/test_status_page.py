"""The status page and the API docs in a real headless browser (Debian's chromium and its driver):
the charts render with data, nothing is fetched from elsewhere, Swagger UI runs offline."""

from __future__ import annotations

import re
import shutil
from urllib.parse import urlparse

import httpx
import pytest

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="scripts/setup --test installs chromium and its driver")


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _foreign(browser, url: str) -> list[str]:
    """Resources the page loaded from anywhere but the agent."""
    names = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    return [n for n in names if urlparse(n).netloc != urlparse(url).netloc]


_CHARTS = """
    return [...document.querySelectorAll('svg.chart')].map(svg => {
        const r = svg.getBoundingClientRect();
        const frame = svg.querySelector('rect[fill="none"]').getBBox();
        const lines = [...svg.querySelectorAll('polyline.series')].map(p => {
            const b = p.getBBox();
            return {w: b.width, h: b.height, n: p.points.numberOfItems, series: p.dataset.series,
                    top: b.y, bottom: b.y + b.height};
        });
        return {cls: svg.getAttribute('class'), title: svg.getAttribute('aria-label'),
                w: r.width, h: r.height, lines: lines, nodata: !!svg.querySelector('.nodata'),
                yticks: [...svg.querySelectorAll('text[text-anchor="end"]')].length,
                frame_top: frame.y, frame_bottom: frame.y + frame.height};
    });"""


def test_the_status_page_lists_the_vfs_and_draws_the_ports(shared_sim_agent, browser, tmp_path):
    url = shared_sim_agent.url
    vfs = httpx.get(f"{url}/v1/vfs").json()
    browser.get(f"{url}/")
    assert browser.title.startswith(f"vftune: {len(vfs)} VFs")
    charts = browser.execute_script(_CHARTS)
    # The ports' charts only: each VF's are on its own page, so a large host keeps / small.
    assert len(charts) == 2 and all("pf-chart" in c["cls"] for c in charts)
    assert all(c["w"] > 100 and c["h"] > 100 and c["yticks"] >= 2 for c in charts)
    assert all(c["lines"] and sum(line["n"] for line in c["lines"]) >= 10 and c["lines"][0]["w"] > 50 for c in charts)
    links = browser.execute_script("return [...document.querySelectorAll('a[href^=\"/vf/\"]')].map(a => a.textContent)")
    assert sorted(links) == sorted(vf["pci"] for vf in vfs)
    text = browser.find_element("tag name", "body").text
    assert "now DE" in text or "now NAPI" in text
    assert "Bought against adaptive ITR: " in text
    assert "Decisions in the last hour" in text and "probe" in text
    assert "None" not in text, "no Python None on the page: an ITR of none reads adaptive"
    assert "adaptive →" in text or "→ adaptive" in text
    assert len(httpx.get(f"{url}/").content) < 120_000
    assert _foreign(browser, url) == []
    browser.save_screenshot(str(tmp_path / "status-page.png"))


def test_a_vf_page_draws_its_charts_with_ticks_inside_the_frame(shared_sim_agent, browser, tmp_path):
    url = shared_sim_agent.url
    vfs = httpx.get(f"{url}/v1/vfs").json()
    busy = max(vfs, key=lambda vf: (vf["itr"] > 0, vf["rx_bps"] or 0))
    browser.get(f"{url}/")
    browser.find_element("link text", busy["pci"]).click()
    assert browser.title == f"vftune: VF {busy['pci']}"
    charts = browser.execute_script(_CHARTS)
    assert len(charts) == 4 and all("vf-chart" in c["cls"] for c in charts)
    assert all(c["yticks"] >= 2 for c in charts), [(c["title"], c["yticks"]) for c in charts]
    by_title = {c["title"].split(",")[0].split(" (")[0]: c for c in charts}
    itr = by_title["ITR set"]
    assert itr["lines"], "a VF under a set rate draws its ITR"
    for line in itr["lines"]:  # inside the frame, not on its border
        assert itr["frame_top"] + 1 < line["top"] and line["bottom"] < itr["frame_bottom"] - 1, (line, itr)
    throughput = by_title["throughput"]
    assert {line["series"] for line in throughput["lines"]} == {"receive", "transmit"}, "rx and tx apart"
    assert max(line["h"] for line in throughput["lines"]) > 10
    assert by_title["interrupts/s"]["lines"] and by_title["its guest's CPU"]["lines"]
    text = browser.find_element("tag name", "body").text
    assert "Bought against its adaptive ITR: " in text and "None" not in text
    assert _foreign(browser, url) == []
    assert httpx.get(f"{url}/vf/0000:0f:1f.7").status_code == 404
    browser.save_screenshot(str(tmp_path / "vf-page.png"))


def test_swagger_ui_runs_offline_from_packaged_assets(shared_sim_agent, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url = shared_sim_agent.url
    browser.get(f"{url}/docs")
    title = WebDriverWait(browser, 30).until(ec.visibility_of_element_located((By.CSS_SELECTOR, ".swagger-ui .info .title")))
    assert title.text.startswith("vftune")
    WebDriverWait(browser, 30).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".opblock"))
    assert _foreign(browser, url) == []
    browser.get_log("browser")  # drop what /docs logged
    browser.get(f"{url}/redoc")
    WebDriverWait(browser, 30).until(lambda b: "/v1/vfs" in b.find_element(By.TAG_NAME, "body").text)
    # ReDoc's bundle links its vendor's logo from a CDN; the page's policy makes the browser refuse it.
    refused = " ".join(entry["message"] for entry in browser.get_log("browser"))
    for name in _foreign(browser, url):
        assert re.search(rf"image '{re.escape(name)}' violates .* The action has been blocked", refused), name
