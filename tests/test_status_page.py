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


def test_the_status_page_draws_every_chart_with_data(shared_sim_agent, browser, tmp_path):
    url = shared_sim_agent.url
    vfs = httpx.get(f"{url}/v1/vfs").json()
    browser.get(f"{url}/")
    assert browser.title.startswith(f"vftune: {len(vfs)} VFs")
    charts = browser.execute_script("""
        return [...document.querySelectorAll('svg.chart')].map(svg => {
            const r = svg.getBoundingClientRect();
            const lines = [...svg.querySelectorAll('polyline.series')].map(p => {
                const b = p.getBBox(); return {w: b.width, h: b.height, n: p.points.numberOfItems};
            });
            return {cls: svg.getAttribute('class'), title: svg.getAttribute('aria-label'),
                    w: r.width, h: r.height, lines: lines, nodata: !!svg.querySelector('.nodata')};
        });""")
    pf_charts = [c for c in charts if "pf-chart" in c["cls"]]
    vf_charts = [c for c in charts if "vf-chart" in c["cls"]]
    assert len(pf_charts) == 2 and len(vf_charts) == 3 * len(vfs)
    assert all(c["w"] > 100 and c["h"] > 100 for c in charts), "every chart is laid out at its size"
    # The PF's packet rate and every busy VF's throughput are drawn as lines with extent.
    assert all(c["lines"] and c["lines"][0]["n"] >= 10 and c["lines"][0]["w"] > 50 for c in pf_charts)
    busy = [vf for vf in vfs if (vf["rx_bps"] or 0) > 1e6]
    throughput = [c for c in vf_charts if c["title"].startswith("throughput")]
    drawn = [c for c in throughput if c["lines"] and max(line["h"] for line in c["lines"]) > 10]
    assert busy and len(drawn) >= len(busy)
    tuned = [c for c in vf_charts if c["title"].startswith("ITR set") and c["lines"]]
    assert len(tuned) >= len([vf for vf in vfs if vf["itr"]])
    text = browser.find_element("tag name", "body").text
    assert "now DE" in text or "now NAPI" in text
    assert "Decisions in the last hour" in text and "probe" in text
    assert _foreign(browser, url) == []
    browser.save_screenshot(str(tmp_path / "status-page.png"))


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
