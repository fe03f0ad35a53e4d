"""The web page, in a real headless Chromium (the system's, driven by Selenium through Debian's
chromedriver) against a real server process on 127.0.0.1: search, open a result at its line,
follow a name to its definition, a permalink, the keyboard, hostile names and contents, the token."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import servers
from support.clients import PY_CLIENT, TS_CLIENT
from support.trees import REPO_ROOT, write_tree

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("the web page's tests need the system's Chromium: apt-get install chromium chromium-driver",
                allow_module_level=True)

from selenium import webdriver  # noqa: E402 - only once a browser is known to be there
from selenium.common.exceptions import NoAlertPresentException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

#: A file name and a text that try to run a script or hide what they are.
HOSTILE_NAME = "evil\u202etxt.<img src=x onerror=alert(1)>.py"
HOSTILE = {
    HOSTILE_NAME: '''
        def pwned_handler():
            """<script>alert("pwned")</script> and "quotes" and 'more'."""
            return "</td></tr><script>document.title='owned'</script>"
        ''',
}


def cli(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codii_sql.cli", *map(str, args)], env=env, cwd=str(REPO_ROOT),
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A team workspace (a Python client, a TypeScript client and a hostile file), its server, and a
    browser."""
    base = tmp_path_factory.mktemp("web")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("WORKSPACE_")}
    env.update(CODII_SQL_HOME=str(base / "home"), CODII_SQL_BACKGROUND="0", CODII_SQL_THREADS="1",
               PYTHONPATH=str(REPO_ROOT))
    py = write_tree(base / "pyclient", {**PY_CLIENT, **HOSTILE}).resolve()
    ts = write_tree(base / "tsclient", TS_CLIENT).resolve()
    for repo in (py, ts):
        assert cli(env, "build", repo).returncode == 0
    assert cli(env, "workspace", "add", "team", py, ts).returncode == 0
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        port = servers.free_port()
        proc = servers.start(["--workspace", "team"], port)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    driver = _browser()
    yield {"url": f"http://127.0.0.1:{port}", "driver": driver, "py": py, "env": env, "base": base}
    driver.quit()
    servers.stop(proc)


def _browser():
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1280,900"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _search(driver, url: str, query: str) -> list:
    driver.get(url + "/")
    box = driver.find_element(By.ID, "q")
    box.send_keys(query, Keys.ENTER)
    WebDriverWait(driver, 60).until(ec.presence_of_element_located((By.ID, "summary")))
    return driver.find_elements(By.CSS_SELECTOR, ".result")


def test_search_open_a_result_at_its_line_and_follow_a_name_to_its_definition(site, tmp_path):
    d, url = site["driver"], site["url"]
    results = _search(d, url, "parse the Retry-After header")
    assert results and "q=parse+the+Retry-After+header" in d.current_url  # the state is the URL
    first = results[0].find_element(By.CSS_SELECTOR, "a.open")
    first.click()
    assert "/file/" in d.current_url and "#L" in d.current_url
    line = int(d.current_url.rsplit("#L", 1)[1])
    row = d.find_element(By.ID, f"L{line}")
    assert "hit" in row.get_attribute("class")
    path = d.current_url.split("/file/", 1)[1].split("?", 1)[0].split("/", 1)[1]
    on_disk = (site["py"] / path).read_text().split("\n") if (site["py"] / path).exists() else None
    shown = row.find_element(By.CSS_SELECTOR, "code").text
    assert on_disk is None or shown == on_disk[line - 1].rstrip()
    d.get(url + "/")
    assert d.switch_to.active_element.get_attribute("id") == "q"  # the search page's box takes them
    d.get(url + "/file/pyclient/client/retry.py")
    assert d.switch_to.active_element.get_attribute("id") != "q"
    name = next(a for a in d.find_elements(By.CSS_SELECTOR, "a.name") if a.text == "parse_retry_after")
    name.click()
    WebDriverWait(d, 30).until(ec.presence_of_element_located((By.CSS_SELECTOR, "ol.names")))
    assert "/symbol?" in d.current_url and "client/headers.py" in d.page_source
    # the keys move on a name's page: the search box took them (a new user's j was typed into it, Enter searched)
    assert d.switch_to.active_element.get_attribute("id") != "q"
    d.find_element(By.CSS_SELECTOR, "ol.names a.open").click()
    line = int(d.current_url.rsplit("#L", 1)[1])
    assert "def parse_retry_after" in d.find_element(By.ID, f"L{line}").text
    shot = tmp_path / "file-view.png"
    d.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_a_permalink_reloads_the_same_answer_and_the_keyboard_browses_it(site):
    d, url = site["driver"], site["url"]
    _search(d, url, "retry a failed request with exponential backoff")
    permalink = d.current_url
    heads = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".result .head")]
    d.get("about:blank")
    d.get(permalink)
    assert [e.text for e in d.find_elements(By.CSS_SELECTOR, ".result .head")] == heads
    body = d.find_element(By.TAG_NAME, "body")
    body.send_keys("j")
    body.send_keys("j")
    current = d.find_elements(By.CSS_SELECTOR, ".result.current")
    assert len(current) == 1 and current[0] == d.find_elements(By.CSS_SELECTOR, ".result")[1]
    target = current[0].get_attribute("data-href")
    body.send_keys(Keys.ENTER)
    WebDriverWait(d, 30).until(lambda drv: "/file/" in drv.current_url and drv.execute_script(
        "return document.readyState") == "complete")
    assert d.current_url.endswith(target.split("#")[1]) and "#L" in d.current_url
    d.find_element(By.TAG_NAME, "body").send_keys("/")
    assert d.switch_to.active_element.get_attribute("id") == "q"


def test_hostile_names_and_contents_are_text_and_no_script_runs(site):
    d, url = site["driver"], site["url"]
    _search(d, url, "pwned_handler")
    with pytest.raises(NoAlertPresentException):
        d.switch_to.alert.text  # noqa: B018
    assert d.title != "owned" and not d.find_elements(By.TAG_NAME, "img")
    assert "\\u202e" in d.page_source and "\u202e" not in d.find_element(By.TAG_NAME, "main").text
    assert "\u202e" not in d.title
    assert '<script>alert("pwned")' not in d.page_source and "&lt;script&gt;" in d.page_source
    link = next(a for a in d.find_elements(By.CSS_SELECTOR, ".result a.open"))
    link.click()
    assert d.title != "owned" and not d.find_elements(By.TAG_NAME, "img")
    assert "\u202e" not in d.title  # the file view's title names the file
    headers = httpx.get(d.current_url).headers
    assert "script-src 'self'" in headers["content-security-policy"] and "unsafe-inline" not in \
        headers["content-security-policy"]
    outside = httpx.get(url + "/file/pyclient/../../../../etc/passwd")
    assert outside.status_code in (404, 400) and "root:" not in outside.text
    assert httpx.get(url + "/file/nothere/x.py").status_code == 404


def test_a_token_closes_every_page_and_the_api(site):
    port = servers.free_port()
    saved = dict(os.environ)
    os.environ.update(site["env"])
    try:
        proc = subprocess.Popen([sys.executable, "-m", "codii_sql.cli", "serve", "--http", str(port), "--workspace",
                                 "team", "--token", "s3cret-team-token"], env=dict(os.environ),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(url + "/login", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        page = httpx.get(url + "/?q=retry", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")
        api = httpx.get(url + "/search", params={"q": "retry"})
        assert api.status_code == 401 and api.json()["error"] == "this server needs its token"
        ok = httpx.get(url + "/search", params={"q": "retry"}, headers={"Authorization": "Bearer s3cret-team-token"})
        assert ok.status_code == 200 and ok.json()["results"]
        assert httpx.get(url + "/search", params={"q": "retry"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
        login = httpx.post(url + "/login", data={"token": "s3cret-team-token", "next": "/"}, follow_redirects=False)
        cookie = login.cookies["codii_sql_token"]
        assert login.status_code == 303 and "s3cret" not in cookie  # the cookie is no bearer token
        assert httpx.get(url + "/search", params={"q": "retry"}, cookies={"codii_sql_token": cookie}).status_code == 200
        assert httpx.get(url + "/search", params={"q": "retry"},
                         cookies={"codii_sql_token": "s3cret-team-token"}).status_code == 401
        d = site["driver"]
        d.get(url + "/?q=retry")
        assert "/login" in d.current_url
        d.find_element(By.NAME, "token").send_keys("s3cret-team-token", Keys.ENTER)
        WebDriverWait(d, 30).until(ec.presence_of_element_located((By.ID, "summary")))
        assert d.current_url.endswith("/?q=retry") and d.find_elements(By.CSS_SELECTOR, ".result")
    finally:
        servers.stop(proc)


def test_the_page_weighs_little_and_works_without_scripts(site):
    """Server-rendered: the answer is in the HTML itself; without results the page is under 100 KB."""
    url = site["url"]
    bare = sum(len(httpx.get(url + p).content) for p in ("/", "/static/style.css", "/static/code.css",
                                                           "/static/page.js"))
    assert bare < 100_000, bare
    html = httpx.get(url + "/", params={"q": "parse_retry_after"}).text
    assert "parse_retry_after" in html and 'class="result"' in html
    assert Path(REPO_ROOT, "codii_sql/http/static/page.js").stat().st_size < 5_000


def test_results_follow_the_query_as_it_is_typed(site):
    """The script asks for the page of the query typed so far and shows its results; the URL
    becomes that search's, without the form's empty fields."""
    d, url = site["driver"], site["url"]
    d.get(url + "/")
    d.find_element(By.ID, "q").send_keys("parse_retry_after")
    WebDriverWait(d, 60).until(ec.presence_of_element_located((By.ID, "summary")))
    assert "/?q=parse_retry_after&mode=hybrid&limit=10" in d.current_url and "glob=" not in d.current_url
    assert any("parse_retry_after" in e.text for e in d.find_elements(By.CSS_SELECTOR, ".result"))
    assert d.switch_to.active_element.get_attribute("id") == "q"  # still typing: the box keeps the focus


def test_a_shard_folder_is_searched_and_read_from_its_stored_chunks(site, tmp_path):
    """An export served alone (serve --shards): the page searches it, the file view shows the text
    its chunks store, says the source is not here, and numbers each line as the file does."""
    shards = tmp_path / "shards"
    shards.mkdir()
    assert cli(site["env"], "export", site["py"], "--to", shards / "pyclient.db").returncode == 0
    port = servers.free_port()
    saved = dict(os.environ)
    os.environ.update(site["env"])
    try:
        proc = servers.start(["--shards", str(shards)], port)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        d, url = site["driver"], f"http://127.0.0.1:{port}"
        results = _search(d, url, "parse_retry_after")
        assert results
        results[0].find_element(By.CSS_SELECTOR, "a.open").click()
        assert "/file/pyclient/" in d.current_url
        assert "The source of this index is not here" in d.find_element(By.TAG_NAME, "main").text
        line = int(d.current_url.rsplit("#L", 1)[1])
        path = d.current_url.split("/file/pyclient/", 1)[1].split("?", 1)[0].split("#", 1)[0]
        on_disk = (site["py"] / path).read_text().split("\n")
        assert d.find_element(By.ID, f"L{line}").find_element(By.CSS_SELECTOR, "code").text == \
            on_disk[line - 1].rstrip()
    finally:
        servers.stop(proc)


def test_a_newline_in_a_name_opens_and_a_file_changed_or_left_out_says_so(site, tmp_path):
    """A file named with a newline was linked from the results, then Starlette's path route did
    not match it (plain 404); a file edited since its build marked the old hit's lines silently."""
    env = site["env"]
    repo = write_tree(tmp_path / "odd", {"new\nline.py": "def newline_thing():\n    return 1\n",
                                         "mod.py": "def moved_thing():\n    return 2\n",
                                         "bundle.py": "x = [" + "1, " * 9000 + "]\n",  # minified
                                         "long.py": "".join(f"def f{i}():\n    return {i}\n" for i in range(6000))
                                         }).resolve()
    assert cli(env, "build", repo, "--no-vectors").returncode == 0
    assert cli(env, "workspace", "add", "odd", repo).returncode == 0
    port = servers.free_port()
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        proc = servers.start(["--workspace", "odd"], port)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        url = f"http://127.0.0.1:{port}"
        page = httpx.get(url + "/", params={"q": "newline_thing"}).text
        assert "/file/odd/new%0Aline.py" in page
        opened = httpx.get(url + "/file/odd/new%0Aline.py?hl=1-2")
        assert opened.status_code == 200 and "newline_thing" in opened.text and "changed since" not in opened.text
        (repo / "mod.py").write_text("# one\n# two\n# three\ndef moved_thing():\n    return 2\n")
        stale = httpx.get(url + "/file/odd/mod.py?hl=1-2").text
        assert "This file changed since it was indexed: lines 1-2 were the hit then" in stale
        # A file the build left out is said so, with why (a new user's minified file was "changed since indexed").
        skipped = httpx.get(url + "/file/odd/bundle.py").text
        assert "not in the index (minified)" in skipped and "changed since" not in skipped
        # A 12,000-line file is shown 5,000 lines at a time from above its hit (50,000 lines were 11.9 MB at once).
        hit = httpx.get(url + "/file/odd/long.py?hl=6001-6002").text
        assert 'id="L6001" class="l hit"' in hit and 'id="L5501"' in hit and 'id="L5500"' not in hit
        assert "Lines 5501-10500 of 12000" in hit and 'href="?from=501&amp;hl=6001-6002">earlier' in hit
        assert 'href="?from=10501&amp;hl=6001-6002">later' in hit and 'id="L10501"' not in hit
        top = httpx.get(url + "/file/odd/long.py").text
        assert 'id="L1"' in top and 'id="L5000"' in top and 'id="L5001"' not in top and "from=5001" in top
        assert len(top) < 2_000_000 and 'id="L5001"' in httpx.get(url + "/file/odd/long.py?from=5001").text
    finally:
        servers.stop(proc)
