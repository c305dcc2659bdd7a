"""Drives the console (/ui) of a running `toolrouter serve` in Debian's
headless Chromium through selenium and its chromedriver.

    python console_check.py URL ADMIN_KEY USER_KEY TRACE_ID EVIL_FUNCTION [SCREENSHOT_DIR]

The server has the ToolBench catalog, a tool whose description holds
HTML and script (EVIL_FUNCTION), and an execute run made with ADMIN_KEY
(TRACE_ID). Prints "ok" and the first page's load times when every check
holds; exits 1 naming the first that does not.
"""
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

URL, ADMIN, USER, TRACE, EVIL = sys.argv[1:6]
SHOTS = sys.argv[6] if len(sys.argv) > 6 else None


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}")
        sys.exit(1)


options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
size = "--window-size=1400,2000" if SHOTS else "--window-size=1400,1000"
for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", size):
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
wait = WebDriverWait(driver, 15)


def shot(name):
    if SHOTS:
        time.sleep(0.5)
        driver.save_screenshot(os.path.join(SHOTS, f"{name}.png"))


def text(element_id):
    return driver.find_element(By.ID, element_id).text


def use_key(key):
    field = driver.find_element(By.ID, "key")
    field.clear()
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button").click()


def error_shown():
    return driver.execute_script("const e = document.getElementById('error'); return e.hidden ? '' : e.textContent")


try:
    # No key: the page loads, the data does not (401 shown, nothing leaked).
    driver.get(URL + "/ui")
    wait.until(lambda d: error_shown())
    check(error_shown().startswith("401"), f"without a key the overview says 401: {error_shown()!r}")
    check(text("cards") == "", "without a key no figure is shown")

    # A user key: the overview is for operators (403), traces of everyone too.
    use_key(USER)
    wait.until(lambda d: error_shown().startswith("403"))
    driver.get(URL + "/ui#traces")
    wait.until(lambda d: d.find_element(By.ID, "traces").is_displayed())
    driver.find_element(By.ID, "traces-all").click()
    wait.until(lambda d: error_shown().startswith("403"))
    check(TRACE not in driver.page_source, "a user key never sees the operator's trace")

    # The operator's key: every page renders with real data.
    use_key(ADMIN)
    driver.get(URL + "/ui#overview")
    wait.until(lambda d: "APIs" in d.find_element(By.ID, "cards").text)
    check(text("readiness").startswith("ready"), f"readiness: {text('readiness')!r}")
    apis = int(text("cards").split(" APIs")[0].split()[-1])
    check(apis > 40000, f"the overview shows the full catalog: {apis} APIs")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#overview .uplot")) == 3)
    # A chart of one sample (a server just started) spans minutes, not years.
    span = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const d = document.createElement('div'); d.id = 'chart-probe'; document.body.appendChild(d);"
        "chart('chart-probe', [{label: 'x'}], [[1795740000], [1]]);"
        "setTimeout(() => { const x = charts['chart-probe'].scales.x; d.remove(); done([x.min, x.max]); }, 200)")
    span = (span[1] - span[0]) if None not in span else None
    check(span is not None and 0 < span <= 3600, f"the time axis of one sample spans {span} s")
    check(0 < span <= 3600, f"the time axis of one sample spans {span} s")
    shot("overview")

    # The first page's load time, fresh (key already in the tab).
    driver.get("about:blank")
    started = time.time()
    driver.get(URL + "/ui#overview")
    wait.until(lambda d: "APIs" in d.find_element(By.ID, "cards").text)
    first_data_ms = (time.time() - started) * 1000
    timing = driver.execute_script(
        "const t = performance.getEntriesByType('navigation')[0]; return [t.domContentLoadedEventEnd, t.loadEventEnd]")
    check(first_data_ms < 1000, f"the overview shows its figures within 1 s: {first_data_ms:.0f} ms")

    # Playground: ranked APIs with their reasons, then a plan drawn as a tree.
    driver.get(URL + "/ui#playground")
    query = driver.find_element(By.ID, "query")
    query.send_keys("ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01")
    driver.find_element(By.ID, "search-button").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results tbody tr")) > 0)
    rows = driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")
    first = rows[0].text
    check("schneetage_for_ecoweather" in driver.find_element(By.ID, "results").text, f"ranked APIs: {first!r}")
    check("#" in first, f"a hit shows its lexical rank: {first!r}")
    driver.find_element(By.ID, "plan-button").click()
    wait.until(lambda d: d.find_element(By.ID, "plan-summary").text.startswith("Path:"))
    wait.until(lambda d: d.execute_script("return !!document.getElementById('plan-tree')._cy"))
    nodes = driver.execute_script("return document.getElementById('plan-tree')._cy.nodes().length")
    check(nodes > 2, f"the plan's search is drawn: {nodes} nodes")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#plan-moves li")) > 0, "the plan's moves are listed")
    shot("playground")

    # Clicking an API's graph link opens its neighbourhood; a node opens its own.
    # ecoweather_for_ecoweather has successors learned from the trajectories
    # (schneetage_for_ecoweather, ranked first, has none).
    link = driver.find_element(By.CSS_SELECTOR, "#results a.graph-link[href$='#graph/ecoweather_for_ecoweather']")
    target = link.get_attribute("href").split("#graph/")[1]
    link.click()
    wait.until(lambda d: d.find_element(By.ID, "graph-node").text.startswith(target))
    wait.until(lambda d: d.execute_script("return !!document.getElementById('graph-canvas')._cy"))
    others = driver.execute_script(
        "return document.getElementById('graph-canvas')._cy.nodes().map(n => n.data('function'))"
        ".filter(f => f && f !== arguments[0] && f !== 'Finish')", target)
    check(len(others) > 0, f"{target} has neighbours drawn")
    driver.execute_script(
        "document.getElementById('graph-canvas')._cy.nodes().filter(n => n.data('function') === arguments[0])"
        ".emit('tap')", others[0])
    wait.until(lambda d: d.find_element(By.ID, "graph-node").text.startswith(others[0]))
    shot("graph")

    # The execute run's trace: listed, and opened as a timeline of moves.
    driver.get(URL + "/ui#traces")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trace-list tbody tr")) > 0)
    rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#trace-list tbody tr")]
    check(any("answered" in r and "Schneetage" in r for r in rows), f"the trace list shows the run: {rows!r}")
    check(any("route" in r.split() for r in rows), f"and the route decision: {rows!r}")
    driver.find_elements(By.CSS_SELECTOR, "#trace-list tbody tr a")[0].click()
    wait.until(lambda d: "decision" in d.find_element(By.ID, "trace-detail").text)
    decision = text("trace-detail")
    check("kept 20 of 30 tools" in decision and "get_weather" in decision, f"the decision: {decision[:300]!r}")
    driver.find_element(By.CSS_SELECTOR, f"#trace-list a[href='#traces/{TRACE}']").click()
    wait.until(lambda d: "Sub-task 1" in d.find_element(By.ID, "trace-detail").text)
    detail = text("trace-detail")
    check("next schneetage_for_ecoweather" in detail, f"the trace shows its moves: {detail[:300]!r}")
    shot("traces")

    # An API page; then the tool whose description holds HTML and script:
    # shown as text, never run.
    driver.get(URL + "/ui#apis/schneetage_for_ecoweather")
    wait.until(lambda d: "Limits" in d.find_element(By.ID, "api-detail").text)
    check("host_rate" in text("api-detail"), "the API page shows its limits")
    shot("apis")
    driver.get(URL + "/ui#playground")
    query = driver.find_element(By.ID, "query")
    query.clear()
    query.send_keys("pwnedcanary lookup")
    driver.find_element(By.ID, "search-button").click()
    wait.until(lambda d: EVIL in d.find_element(By.ID, "results").text)
    check("<script>" in text("results"), "the description's <script> is shown as text")
    shot("escaped")
    check(driver.execute_script("return window.__pwned === undefined"), "no script from a description ran")
    driver.get(URL + "/ui#apis/" + EVIL)
    wait.until(lambda d: "<img" in d.find_element(By.ID, "api-detail").text)
    check(driver.execute_script("return window.__pwned === undefined"), "nothing ran on the API page")
    check(not driver.find_elements(By.CSS_SELECTOR, "#api-detail img, #results script"), "no element was injected")

    print("ok", json.dumps({"first_data_ms": round(first_data_ms), "dom_content_loaded_ms": round(timing[0]),
                            "load_event_ms": round(timing[1])}))
finally:
    driver.quit()
