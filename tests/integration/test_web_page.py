"""The web page in a real browser (headless Chromium through the system chromedriver), against
a real `gamebatch serve`, Redis and workers."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers
from tests.helpers import answers, input_text, random_cases
from tests.integration.server import Server

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

STRGAME = get_problem("strgame")
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMEDRIVER is None or CHROMIUM is None, reason="needs chromium and chromium-driver (apt)"
)


@pytest.fixture
def server(tmp_path: Path, redis_server: RedisServer, workers: Workers) -> Iterator[Server]:
    workers.start(concurrency=2)
    running = Server(tmp_path, redis_server.url).start()
    yield running
    running.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service as ChromeService

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(downloads),
            "download.prompt_for_download": False,
            "safebrowsing.enabled": True,
        },
    )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=ChromeService(CHROMEDRIVER or ""), options=options)
    driver.set_window_size(1200, 900)
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    driver.downloads = downloads
    yield driver
    driver.quit()


def _wait(driver: Any, condition: Callable[[Any], Any], seconds: float = 60) -> Any:
    # a table the page renders again between two reads of it is read again at the next poll
    stale = [StaleElementReferenceException]
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.1, ignored_exceptions=stale).until(
            condition
        )
    except TimeoutException:
        raise AssertionError(driver.find_element(By.TAG_NAME, "main").text[-3000:]) from None


def _text(driver: Any, element_id: str) -> str:
    text: str = driver.find_element(By.ID, element_id).text
    return text


def _sign_in(driver: Any, server: Server, token: str) -> None:
    driver.get(server.url + "/")
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token, Keys.ENTER)  # the keyboard is enough


def _console_errors(driver: Any) -> list[str]:
    """Script errors and assets that failed to load; API refusals (a 401, a 422) are answers
    the page shows, which Chromium logs too."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE"
        and not ("/v1/" in e["message"] and "Failed to load resource" in e["message"])
    ]


def test_a_wrong_token_says_so_and_the_right_one_is_accepted(server: Server, browser: Any) -> None:
    _sign_in(browser, server, "not-the-token")
    _wait(browser, lambda d: "wrong or expired token" in _text(d, "token-message"))
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "token-message") == "token accepted")
    _wait(browser, lambda d: _text(d, "live") == "live")
    assert Select(browser.find_element(By.ID, "solve-problem")).options[0].text == "pathgame"


def test_files_are_uploaded_solved_live_and_downloaded(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    texts = {
        f"f{i}.in": input_text(STRGAME, random_cases(STRGAME, "random", 300, 60, seed=i))
        for i in (1, 2)
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    bad = tmp_path / "bad.in"
    bad.write_text("2\n1 1\nab\n")
    Select(browser.find_element(By.ID, "solve-problem")).select_by_value("strgame")
    paths = "\n".join(str(tmp_path / n) for n in [*texts, "bad.in"])
    browser.find_element(By.ID, "files").send_keys(paths)
    browser.find_element(By.CSS_SELECTOR, "#solve-form button").click()

    def states(driver: Any) -> dict[str, str]:
        rows = driver.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
        return {
            r.find_element(By.CLASS_NAME, "name").text: r.find_element(By.CLASS_NAME, "state").text
            for r in rows
        }

    _wait(
        browser,
        lambda d: (
            len(states(d)) == 3
            and all(s.split("\n")[0] in ("done", "failed") for s in states(d).values())
        ),
    )
    found = states(browser)
    assert found["f1.in"] == "done" and found["f2.in"] == "done"
    assert found["bad.in"].startswith("failed\nbad.in:3: case 2: file ends"), found["bad.in"]
    name = "f2.in"
    row = browser.find_element(
        By.XPATH, f"//table[@id='jobs']//tr[td[@class='name'][text()='{name}']]"
    )
    solved = row.find_element(By.CLASS_NAME, "solved")
    assert solved.get_attribute("value") == solved.get_attribute("max") == "300"
    sent = row.find_element(By.CLASS_NAME, "uploaded")  # the bytes bar, shown while it uploaded
    size = str((tmp_path / name).stat().st_size)
    assert sent.get_attribute("value") == sent.get_attribute("max") == size
    row.find_element(By.CLASS_NAME, "download").click()
    target = browser.downloads / f"{name}.out"
    deadline = time.monotonic() + 20
    while not target.exists():
        assert time.monotonic() < deadline, list(browser.downloads.iterdir())
        time.sleep(0.1)
    assert target.read_text() == answers(STRGAME, texts[name])
    assert _console_errors(browser) == []


def _contest(tmp_path: Path) -> tuple[Path, str]:
    """An archive of two contestants (bob has the first case wrong); bob's first answer."""
    test = input_text(STRGAME, random_cases(STRGAME, "random", 12, 40, seed=5))
    right = answers(STRGAME, test)
    first = right.splitlines()[0]
    other = "Dirty" if first == "Pure" else "Pure"
    files = {
        "contest/tests/t1.in": test,
        "contest/subs/alice/t1.out": right,
        "contest/subs/bob/t1.out": right.replace(first, other, 1),
    }
    archive = tmp_path / "contest.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive, other


def test_a_contest_archive_is_graded_with_a_sortable_scoreboard_and_case_tables(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    archive, wrong_word = _contest(tmp_path)
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    Select(browser.find_element(By.ID, "grade-problem")).select_by_value("strgame")
    browser.find_element(By.ID, "archive").send_keys(str(archive))
    browser.find_element(By.CSS_SELECTOR, "#grade-form button").click()
    _wait(browser, lambda d: d.find_element(By.ID, "grading").is_displayed())

    def board(driver: Any) -> list[str]:
        rows = driver.find_elements(By.CSS_SELECTOR, "#scoreboard tbody tr")
        return [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows]

    assert board(browser) == ["alice", "bob"]
    header = browser.find_element(By.XPATH, "//table[@id='scoreboard']//button[text()='Score']")
    header.click()  # ascending score: bob first
    _wait(browser, lambda d: board(d) == ["bob", "alice"])
    browser.find_element(By.XPATH, "//table[@id='scoreboard']//button[text()='Score']").send_keys(
        Keys.ENTER
    )
    _wait(browser, lambda d: board(d) == ["alice", "bob"])
    Select(browser.find_element(By.ID, "submission")).select_by_visible_text("bob / t1: 11 of 12")

    def cases(driver: Any) -> list[list[str]]:
        rows = driver.find_elements(By.CSS_SELECTOR, "#cases tbody tr")
        return [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]

    _wait(browser, lambda d: len(cases(d)) == 1 and cases(d)[0][4] not in ("", "…"))
    number, verdict, expected, found, shown_input, time_ms, memory = cases(browser)[0]
    assert time_ms == memory == ""  # outputs have none: only a judged program's runs do
    assert (number, verdict, found) == ("1", "WA", wrong_word) and expected != found
    assert shown_input.split(" / ")[0].split()[0].isdigit()  # the case's "n K" line
    browser.find_element(By.ID, "wrong-only").click()
    _wait(browser, lambda d: len(cases(d)) == 12)
    assert _console_errors(browser) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="judging programs needs root")
def test_judged_programs_show_each_case_with_its_verdict_time_and_memory(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    from tests.integration.test_judge import C_PROGRAM, _test_input

    test = tmp_path / "t1.in"
    _test_input(test)
    crash = C_PROGRAM.replace("    char *win", "    if (n == 4) abort();\n    char *win")
    mark = f"// {tmp_path.name} {os.getpid()}\n"
    files = {
        "tests/t1.in": test.read_text(),
        "progs/ann/main.c": C_PROGRAM + mark,
        "progs/bob/main.c": crash + mark,
    }
    archive = tmp_path / "programs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    Select(browser.find_element(By.ID, "grade-problem")).select_by_value("strgame")
    browser.find_element(By.ID, "archive").send_keys(str(archive))
    browser.find_element(By.CSS_SELECTOR, "#grade-form button").click()
    _wait(browser, lambda d: d.find_element(By.ID, "grading").is_displayed(), seconds=120)
    Select(browser.find_element(By.ID, "submission")).select_by_visible_text("bob / t1: 9 of 10")

    def cases(driver: Any) -> list[list[str]]:
        rows = driver.find_elements(By.CSS_SELECTOR, "#cases tbody tr")
        return [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]

    _wait(browser, lambda d: len(cases(d)) == 1)
    number, verdict, _, found, _, time_ms, memory = cases(browser)[0]
    assert (number, verdict, found) == ("5", "RE", "signal SIGABRT")
    assert float(time_ms) >= 0 and int(memory) > 0
    assert _console_errors(browser) == []


def test_hacked_programs_show_each_counterexample_with_its_input(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    from tests.integration.test_hack import FAULTS
    from tests.integration.test_judge import GOOD

    mark = f"// {tmp_path.name} {os.getpid()} page\n"
    archive = tmp_path / "programs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("wide", "chain"):  # both hacked: the search ends without a budget spent
            data = (GOOD.replace("// FAULT", FAULTS[name]) + mark).encode()
            info = tarfile.TarInfo(f"progs/{name}/main.cpp")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    Select(browser.find_element(By.ID, "grade-problem")).select_by_value("strgame")
    browser.find_element(By.ID, "archive").send_keys(str(archive))
    browser.find_element(By.ID, "hack-button").click()
    _wait(browser, lambda d: d.find_element(By.ID, "hack").is_displayed(), seconds=120)

    def rows(driver: Any) -> dict[str, list[str]]:
        found = driver.find_elements(By.CSS_SELECTOR, "#hacks tbody tr")
        cells = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in found]
        return {c[0]: c[1:] for c in cells}

    _wait(browser, lambda d: len(rows(d)) == 2)
    shown = rows(browser)
    result, expected, found, given, _ = shown["wide"]
    assert (result, {expected, found}) == ("hacked: WA", {"Pure", "Dirty"})
    count, strings, _, *words = given.split()  # T, then n K and the strings
    assert count == "1" and int(strings) == len(words) > 6
    assert shown["chain"][0] == "hacked: RE" and shown["chain"][2] == "signal SIGSEGV"
    assert "hack search done" in _text(browser, "grade-message")
    assert _console_errors(browser) == []


SCREENSHOTS = os.environ.get("PAGE_SCREENSHOTS")  # a folder to keep the page's pictures in


def _screenshot(driver: Any, tmp_path: Path, name: str) -> Path:
    """A picture of the whole page, kept in $PAGE_SCREENSHOTS when it is set."""
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    driver.set_window_size(width, max(height + 120, 600))
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 1000
    return path


def test_no_error_before_a_token_is_typed(server: Server, browser: Any) -> None:
    browser.get(server.url + "/")
    _wait(browser, lambda d: "enter an API token" in _text(d, "live"))
    assert _text(browser, "token-message") == "" and _console_errors(browser) == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_page_at_desktop_and_phone_width_after_a_reload(
    server: Server, browser: Any, tmp_path: Path, width: int
) -> None:
    """Jobs with their size, cases and time, one refused with a long error, and a grading
    with its notes and report links; the page is no wider than the window, and a reload
    shows the same grading again."""
    archive, _ = _contest(tmp_path)
    browser.set_window_size(width, 900)
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    good = tmp_path / "good.in"
    good.write_text(input_text(STRGAME, random_cases(STRGAME, "random", 50, 30, seed=3)))
    bad = tmp_path / "a-rather-long-name-for-a-file-that-is-not-valid-input.in"
    bad.write_text("3\n1 1\na\n" + "x" * 300 + "\n")
    Select(browser.find_element(By.ID, "solve-problem")).select_by_value("strgame")
    browser.find_element(By.ID, "files").send_keys(f"{good}\n{bad}")
    browser.find_element(By.CSS_SELECTOR, "#solve-form button").click()

    def row(driver: Any, name: str) -> dict[str, str]:
        for tr in driver.find_elements(By.CSS_SELECTOR, "#jobs tbody tr"):
            cells = {
                c: tr.find_element(By.CLASS_NAME, c).text
                for c in ("name", "state", "size", "cases", "time")
            }
            if cells["name"] == name:
                return cells
        return {}

    _wait(browser, lambda d: row(d, "good.in").get("state") == "done")
    _wait(browser, lambda d: row(d, bad.name).get("state", "").startswith("failed"))
    shown = row(browser, "good.in")
    size = f"{good.stat().st_size / 1000:.1f} kB"  # about 2 kB
    assert (shown["size"], shown["cases"]) == (size, "50"), shown
    assert shown["time"].endswith(("ms", "s")), shown
    Select(browser.find_element(By.ID, "grade-problem")).select_by_value("strgame")
    browser.find_element(By.ID, "archive").send_keys(str(archive))
    browser.find_element(By.CSS_SELECTOR, "#grade-form button").click()
    _wait(browser, lambda d: d.find_element(By.ID, "grading").is_displayed())
    links = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#grading-links button")]
    assert {"Download report.json", "Download junit", "Download scoreboard.csv"} <= set(links)
    page = browser.execute_script("return document.documentElement.scrollWidth")
    assert page <= width, f"the page is {page} px wide in a window of {width} px"
    error = browser.find_element(By.CSS_SELECTOR, "#jobs .job-error")
    assert error.size["width"] > min(width, 700) / 3, "the error is squeezed into a column"
    _screenshot(browser, tmp_path, f"page-{width}")
    browser.refresh()  # the grading on show survives a reload
    _wait(browser, lambda d: d.find_element(By.ID, "grading").is_displayed())
    grading = browser.execute_script("return state.grading")
    assert grading and browser.current_url.endswith(f"#grading={grading}")
    _wait(
        browser,
        lambda d: (
            Select(d.find_element(By.ID, "recent")).first_selected_option.get_attribute("value")
            == grading
        ),
    )
    assert len(Select(browser.find_element(By.ID, "submission")).options) == 2
    assert _console_errors(browser) == []


def test_a_refused_archive_and_phone_width(server: Server, browser: Any, tmp_path: Path) -> None:
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("../../etc/cron.d/x")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    browser.set_window_size(375, 800)
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    browser.find_element(By.ID, "archive").send_keys(str(evil))
    browser.find_element(By.CSS_SELECTOR, "#grade-form button").click()
    _wait(browser, lambda d: "climbs out of the archive" in _text(d, "grade-message"))
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= 375, f"the page is {width}px wide at phone width"
    assert _console_errors(browser) == []
    assert not list((server.spool / "gradings").glob("*/files"))


def test_the_page_reconnects_to_the_event_feed_and_misses_nothing(
    server: Server, browser: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    """While the page's server is down, a job is made and ends through another server of the
    same cluster; once its own server is back, the page shows that job done."""
    _sign_in(browser, server, server.token)
    _wait(browser, lambda d: _text(d, "live") == "live")
    server.kill()  # the feed's connection drops
    _wait(browser, lambda d: _text(d, "live").startswith("reconnecting"))
    (tmp_path / "b").mkdir()
    beside = Server(tmp_path / "b", redis_server.url).start()  # another server, same Redis
    try:
        with beside.client() as http:
            text = input_text(STRGAME, random_cases(STRGAME, "random", 40, 30, seed=77))
            job = http.put(
                "/v1/jobs", params={"problem": "strgame", "name": "late.in"}, content=text.encode()
            ).json()
            deadline = time.monotonic() + 60
            while http.get(f"/v1/jobs/{job['id']}").json()["state"] != "done":
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        beside.stop()
    assert _text(browser, "live").startswith("reconnecting")  # it happened while away
    again = Server(server.dir.parent, redis_server.url)
    again.port, again.url = server.port, server.url
    again.token = server.token
    (again.dir / "token").write_text(server.token + "\n")
    again.start()
    try:
        _wait(browser, lambda d: _text(d, "live") == "live", 30)

        def late_state(driver: Any) -> str:
            rows = driver.find_elements(By.CSS_SELECTOR, f"#jobs tr[data-job='{job['id']}']")
            return str(rows[0].find_element(By.CLASS_NAME, "state").text) if rows else ""

        _wait(browser, lambda d: late_state(d) == "done")
        assert _console_errors(browser) == []
    finally:
        again.stop()
