"""The web page in a real headless Chromium: Enter to results painted, page weight, a long file's view.

    python benchmarks/web.py                       # flask + werkzeug + jinja2 as a workspace
    python benchmarks/web.py --no-vectors --runs 30

The three projects of the ``medium`` corpus (benchmarks/corpora.py) are copied to a scratch
folder, a generated 5,000-line Python module is added to the first, each is built with the
product's build (vectors too unless ``--no-vectors``) and joined into one workspace, served by
``codii-sql serve --http``. After two warm-up searches per query, each query is typed into the
page's box and Enter pressed; the new page's Paint Timing (first-contentful-paint) and Navigation
Timing (load event end) are read from the browser, both measured from the navigation's start,
which is the form's submission. Page weight is the bytes of ``/`` and everything it loads,
without results. The file view is the 5,000-line module opened at a line: server time (a GET from
this process) and the browser's load event. Targets (issue 26): at most 150 ms, 100 KB and
300 ms at load below 2. Needs ``chromium`` and ``chromium-driver`` (Debian) and selenium.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
QUERIES = ("url routing rules", "render a template with context", "parse_cookie", "session cookie signing",
           "how are redirects built", "escape html in the output", "request json body", "Undefined",
           "add a url rule to the application", "sandboxed environment attribute access")


def cli(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "codii_sql.cli", *args], check=True, capture_output=True, env=env)


def long_module(lines: int) -> str:
    """About ``lines`` lines of plain Python: classes of small methods, names and strings to colour."""
    out, i = ['"""A generated module for the file view benchmark."""', "", "import os", ""], 0
    while len(out) < lines - 12:
        out += [f"class Handler{i}:", f'    """Handle kind {i} of request."""', "",
                f"    def handle_{i}(self, request, retries={i % 5}):",
                f"        path = os.path.join(request.root, 'kind_{i}')",
                "        for attempt in range(retries):",
                f"            if request.ok(path, attempt):  # attempt {i}",
                f"                return {{'kind': {i}, 'path': path}}",
                "        raise RuntimeError(f'kind {i} failed after {retries} tries')", "", ""]
        i += 1
    return "\n".join(out[:lines]) + "\n"


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.binary_location = shutil.which("chromium")
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


TIMING = """
const nav = performance.getEntriesByType('navigation')[0];
const fcp = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
return [fcp ? fcp.startTime : null, nav.loadEventEnd, nav.responseStart, nav.transferSize];
"""


def timed_search(driver, url: str, query: str) -> tuple[float, float, float]:
    """(ms to first paint, ms to load end, ms to first byte) of typing ``query`` and pressing Enter."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(url + "/")
    box = driver.find_element(By.ID, "q")
    box.send_keys(query)
    box.send_keys(Keys.ENTER)
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.ID, "summary") and all(d.execute_script(TIMING)[:2]))
    fcp, load, first_byte, _ = driver.execute_script(TIMING)
    return fcp, load, first_byte


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, default=corpora.DEFAULT_CACHE_DIR)
    ap.add_argument("--no-vectors", action="store_true", help="build BM25 only (faster to set up)")
    ap.add_argument("--runs", type=int, default=2, help="timed passes over the queries")
    ap.add_argument("--port", type=int, default=18941)
    args = ap.parse_args()
    source = corpora.fetch("medium", args.cache_dir)
    work = Path(tempfile.mkdtemp(prefix="codii-web-"))
    env = {**os.environ, "CODII_SQL_HOME": str(work / "home"), "CODII_SQL_BACKGROUND": "0"}
    proc = driver = None
    try:
        members = []
        for project in sorted(p for p in source.iterdir() if p.is_dir()):
            members.append(shutil.copytree(project, work / project.name.split("-")[0].lower()))
        (members[0] / "generated_long.py").write_text(long_module(5000))
        for member in members:
            t = time.perf_counter()
            cli(env, "build", str(member), *(["--no-vectors"] if args.no_vectors else []))
            print(f"built {member.name} in {time.perf_counter() - t:.1f} s")
        cli(env, "workspace", "add", "bench", *map(str, members))
        proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "serve", "--http", str(args.port),
                                 "--workspace", "bench"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        url = f"http://127.0.0.1:{args.port}"
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                if proc.poll() is not None:
                    sys.exit(f"the server exited: {proc.stderr.read().decode()}")
            time.sleep(0.1)
        from selenium.webdriver.support.ui import WebDriverWait
        driver = browser()
        for query in QUERIES:  # warm: indexes open, pages cached, the model loaded
            for _ in range(2):
                timed_search(driver, url, query)
        print(f"# warm; load average {os.getloadavg()[0]:.2f}")
        paint, load, first_byte = [], [], []
        for _ in range(args.runs):
            for query in QUERIES:
                f, lo, b = timed_search(driver, url, query)
                paint.append(f)
                load.append(lo)
                first_byte.append(b)
        print(f"Enter to results painted (first-contentful-paint) over {len(paint)} searches of 3 codebases: "
              f"p50 {statistics.median(paint):.0f} ms, p95 {pct(paint, 0.95):.0f} ms; load end p50 "
              f"{statistics.median(load):.0f} ms; first byte p50 {statistics.median(first_byte):.0f} ms")
        bare = {p: len(httpx.get(url + p).content) for p in ("/", "/static/style.css", "/static/code.css",
                                                           "/static/page.js")}
        print(f"page weight without results: {sum(bare.values()) / 1000:.1f} KB ({bare})")
        name = members[0].name
        view = f"{url}/file/{name}/generated_long.py?hl=2500-2510#L2500"
        server = []
        for i in range(5):  # the first colours the file; the others find it coloured
            t = time.perf_counter()
            size = len(httpx.get(view.replace("2510", str(2510 + i)), timeout=60).content)
            server.append((time.perf_counter() - t) * 1000)
        browse = []
        for _ in range(5):
            driver.get("about:blank")
            driver.get(view)
            browse.append(WebDriverWait(driver, 60).until(lambda d: d.execute_script(TIMING)[1] or None))
        print(f"file view of a 5,000-line file ({size / 1e6:.2f} MB of HTML): server first {server[0]:.0f} ms "
              f"(colouring it), then p50 {statistics.median(server[1:]):.0f} ms; browser load end p50 "
              f"{statistics.median(browse):.0f} ms")
    finally:
        if driver:
            driver.quit()
        if proc:
            proc.terminate()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
