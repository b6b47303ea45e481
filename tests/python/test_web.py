"""`memfs --data DIR web`, clicked through in a real headless Chromium
(Debian's, driven by Playwright) beside a real mount, with the agent writing
through `memfs serve --stdio`. Screenshots of each view go to target/web-*.png."""
import json
import re
import os
import pathlib
import subprocess
import time

import pytest

CI = os.environ.get("CI") == "true"
REPO = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"

from playwright import sync_api  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

import sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from pngs import png  # noqa: E402


def need(ok, why):
    if not ok:
        if CI:
            pytest.fail(f"CI=true needs {why}")
        pytest.skip(f"needs {why}")


class Agent:
    """An agent session: `memfs serve --stdio`, one JSON line per call."""

    def __init__(self, memfs_bin, data):
        self.p = subprocess.Popen([memfs_bin, "--data", str(data), "--as", "claude", "serve", "--stdio"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, bufsize=1)

    def call(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        answer = json.loads(self.p.stdout.readline())
        assert not answer["is_error"], answer
        return answer["content"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


@pytest.fixture
def setup(memfs_bin, tmp_path):
    need(os.path.exists("/dev/fuse") and os.geteuid() == 0, "/dev/fuse and root (the page runs beside a mount)")
    need(os.path.exists(CHROMIUM), "Debian's chromium")
    data = tmp_path / "data"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mount = subprocess.Popen([memfs_bin, "--data", str(data), "mount", str(mnt)], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while not os.path.ismount(mnt) and time.time() < deadline:
        assert mount.poll() is None, mount.stderr.read()
        time.sleep(0.1)
    assert os.path.ismount(mnt)
    (mnt / "people").mkdir()
    (mnt / "people" / "ana.md").write_text("Ana prefers email.\n")
    web = subprocess.Popen([memfs_bin, "--data", str(data), "web"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    url = web.stdout.readline().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/p/[0-9a-f]{32}/login\?t=\d+\.[0-9a-f]{64}", url), url
    base = url.split("/login")[0]
    agent = Agent(memfs_bin, data)
    yield {"data": data, "mnt": mnt, "url": url, "base": base, "agent": agent, "memfs": memfs_bin}
    agent.close()
    web.terminate()
    assert web.wait(timeout=30) == 0, web.stderr.read()
    subprocess.run(["umount", str(mnt)])
    assert mount.wait(timeout=30) == 0


def shot(page, name):
    out = REPO / "target" / f"web-{name}.png"
    out.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(out), full_page=True)


def test_follow_review_and_undo_an_agents_memory_from_the_page(setup):
    s = setup
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(s["url"])
        assert page.url == s["base"] + "/"
        assert "people/ana.md" in page.inner_text("main")
        shot(page, "tree")
        # The login link works again while it is valid (a second browser
        # context: a session of its own); a link whose time or signature
        # was changed does not, nor does the page without a session or
        # outside the instance's own path.
        again = browser.new_context().new_page()
        again.goto(s["url"])
        assert again.url == s["base"] + "/", again.inner_text("body")
        again.close()
        other = browser.new_context().new_page()
        until, mac = s["url"].split("?t=")[1].split(".")
        other.goto(s["url"].replace(f"t={until}.", f"t={int(until) + 60}."))
        assert "not valid" in other.inner_text("body")
        other.goto(s["base"] + "/review")
        assert "log in" in other.inner_text("body")
        port_root = s["base"].rsplit("/p/", 1)[0]
        other.goto(port_root + "/review")
        assert "no such page" in other.inner_text("body")
        # `memfs web --link` prints a fresh link for this running page.
        fresh = subprocess.run([s["memfs"], "--data", str(s["data"]), "web", "--link"],
                               capture_output=True, text=True, timeout=30)
        assert fresh.returncode == 0 and fresh.stdout.startswith(s["base"] + "/login?t="), fresh
        other.goto(fresh.stdout.strip())
        assert other.url == s["base"] + "/"
        other.close()

        # The page is open on the review queue; the agent writes; the change appears without a reload.
        # The queue reads like a pull request: by session, by file, one net diff a file.
        page.goto(s["base"] + "/review")
        page.evaluate("window.__same_page = 1")
        s["agent"].call(command="create", path="/memories/plan.md", file_text="step one\nstep two\n")
        s["agent"].call(command="str_replace", path="/memories/plan.md", old_str="step two", new_str="step 2")
        page.wait_for_selector("section.change:has-text('plan.md') >> text=2 changes", timeout=20000)
        assert page.evaluate("window.__same_page") == 1, "the page reloaded"
        # (The count comes from its own poll: it may be a tick behind the list.)
        expect(page.locator("#review-count")).to_have_text("2", timeout=20000)
        plan = page.locator("section.change", has_text="plan.md")
        assert plan.locator("pre.diff .del").all_inner_texts() == []
        assert plan.locator("pre.diff .add").all_inner_texts() == ["+step one", "+step 2"]
        assert "agent:stdio(claude)" in page.inner_text("section.session h2")
        shot(page, "review")
        # Keep the file: the queue is empty.
        plan.locator("button.keep").click()
        page.wait_for_selector(".said")
        assert "kept 2 changes" in page.inner_text(".said")
        expect(page.locator("#review-count")).to_have_text("0", timeout=20000)
        assert "0 changes" in page.inner_text("main")

        # Two more edits, undone together (the older is not refused for the newer).
        s["agent"].call(command="str_replace", path="/memories/plan.md", old_str="step 2", new_str="step three")
        s["agent"].call(command="str_replace", path="/memories/plan.md", old_str="step one", new_str="step 1")
        page.wait_for_selector("section.change:has-text('plan.md') >> text=2 changes", timeout=20000)
        plan = page.locator("section.change", has_text="plan.md")
        assert plan.locator("pre.diff .del").all_inner_texts() == ["-step one", "-step 2"]
        assert plan.locator("pre.diff .add").all_inner_texts() == ["+step 1", "+step three"]
        plan.locator("button.undo", has_text="undo these 2 together").click()
        page.wait_for_selector(".said")
        assert "undid 1 file(s)" in page.inner_text(".said"), page.inner_text(".said")
        assert (s["mnt"] / "plan.md").read_text() == "step one\nstep 2\n"
        view = s["agent"].call(command="view", path="/memories/plan.md")
        assert view.endswith("1\tstep one\n     2\tstep 2"), view
        expect(page.locator("#review-count")).to_have_text("0", timeout=20000)
        # The undo is the person's, named: the page, and who runs it.
        import pwd
        log = subprocess.run([s["memfs"], "--data", str(s["data"]), "log", "--json", "/memories/plan.md"],
                             capture_output=True, text=True, check=True)
        newest = json.loads(log.stdout.splitlines()[0])
        assert newest["actor"]["kind"] == "person", newest
        assert newest["actor"]["process"] == "page:" + pwd.getpwuid(os.getuid()).pw_name, newest

        # A file holding markup shows as text, and runs nothing.
        s["agent"].call(command="create", path="/memories/x.html",
                        file_text="<script>window.__pwned = 1</script><b>bold</b>\n")
        page.goto(s["base"] + "/file?path=/memories/x.html")
        assert "<script>window.__pwned = 1</script><b>bold</b>" in page.inner_text("table.content")
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.locator("table.content b").count() == 0
        shot(page, "file")

        # An image a person saved through the mount shows as an image.
        (s["mnt"] / "diagram.png").write_bytes(png())
        page.goto(s["base"] + "/file?path=/memories/diagram.png")
        page.wait_for_selector("img.image")
        deadline = time.time() + 5
        while page.evaluate("document.querySelector('img.image').naturalWidth") != 2 and time.time() < deadline:
            time.sleep(0.1)
        assert page.evaluate("document.querySelector('img.image').naturalWidth") == 2

        # History, a version's diff, the deleted files, the redaction's confirmation.
        s["agent"].call(command="delete", path="/memories/x.html")
        page.goto(s["base"] + "/history")
        assert "agent:stdio(claude)" in page.inner_text("main")
        assert "person:" in page.inner_text("main")
        shot(page, "history")
        page.goto(s["base"] + "/deleted")
        assert "x.html" in page.inner_text("main")
        shot(page, "deleted")
        page.click("text=x.html")
        page.wait_for_selector("h2:has-text('History')")
        first = page.locator("table.history a", has_text="v").last
        first.click()
        page.wait_for_selector("pre.diff")
        assert "+<script>window.__pwned = 1</script><b>bold</b>" in page.inner_text("pre.diff")
        shot(page, "diff")
        page.click("a.redact")
        assert "cannot be brought back" in page.inner_text("main")
        shot(page, "redact")
        page.click("button.danger")
        page.wait_for_selector(".said")
        assert "content erased" in page.inner_text(".said"), page.inner_text(".said")
        assert "Its content is redacted." in page.inner_text("main")

        # A POST without the CSRF token (or with a wrong one) is refused, even with the session cookie.
        r = page.request.post(s["base"] + "/keep", form={"version": "1", "back": "/"}, max_redirects=0)
        assert r.status == 403 and "nothing was changed" in r.text()
        r = page.request.post(s["base"] + "/undo", form={"version": "1", "csrf": "0" * 48}, max_redirects=0)
        assert r.status == 403
        # The page sets a strict policy and a session cookie scripts cannot read.
        head = page.request.get(s["base"] + "/")
        assert "script-src 'self'" in head.headers["content-security-policy"]
        assert page.evaluate("document.cookie") == ""
        assert not [e for e in errors if "Content Security Policy" in e], errors
        browser.close()


def test_the_page_on_the_http_server_logs_in_with_a_token_and_follows_the_api(memfs_bin, tmp_path):
    need(os.path.exists(CHROMIUM), "Debian's chromium")
    import anthropic
    from http_server import Server

    server = Server(memfs_bin, tmp_path / "stores")
    try:
        admin = anthropic.Anthropic(api_key=server.token("--admin", "--name", "ops"), base_url=server.url, max_retries=0)
        ms = admin.beta.memory_stores
        store = ms.create(name="team").id
        other = ms.create(name="other").id
        mem = ms.memories.create(store, path="/notes.md", content="first\n")
        ms.memories.create(other, path="/secret.md", content="not yours\n")
        ana = server.token("--name", "ana", "--store", store)
        viewer = server.token("--name", "viewer", "--store", store, "--read-only")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.goto(server.url + "/web/")
            page.fill("input[name=token]", ana)
            page.click("button[type=submit]")
            assert page.url == f"{server.url}/web/{store}/"
            assert "notes.md" in page.inner_text("main")
            # Another store stays out of reach with this session.
            r = page.request.get(f"{server.url}/web/{other}/")
            assert r.status == 401 and "secret.md" not in r.text()
            # A change through the API appears on the open page without a reload
            # (the create before it kept first: everything shown).
            page.goto(f"{server.url}/web/{store}/review")
            page.locator("button.keep", has_text="Keep everything shown").click()
            page.wait_for_selector(".said")
            expect(page.locator("#review-count")).to_have_text("0", timeout=20000)
            page.evaluate("window.__same_page = 1")
            ms.memories.update(mem.id, memory_store_id=store, content="second\n")
            page.wait_for_selector("section.change >> text=write", timeout=20000)
            assert page.evaluate("window.__same_page") == 1
            shot(page, "http-review")
            # ... and undo from the page is what the API sees next.
            page.locator("section.change", has_text="write").locator("button.undo").click()
            page.wait_for_selector(".said")
            assert ms.memories.retrieve(mem.id, memory_store_id=store).content == "first\n"
            # ... recorded as the person with the token's name, through the page.
            log = subprocess.run([memfs_bin, "--data", str(server.root / store), "log", "--json"],
                                 capture_output=True, text=True, check=True)
            newest = json.loads(log.stdout.splitlines()[0])
            assert newest["actor"]["process"] == "page:ana", newest
            # A read-only token's session reads and cannot change.
            ro = browser.new_page()
            ro.goto(server.url + "/web/")
            ro.fill("input[name=token]", viewer)
            ro.click("button[type=submit]")
            assert "notes.md" in ro.inner_text("main")
            ro.goto(f"{server.url}/web/{store}/history")
            r = ro.request.post(f"{server.url}/web/{store}/undo", form={"version": "1", "csrf": "x"}, max_redirects=0)
            assert r.status == 403
            # A revoked token ends its sessions.
            subprocess.run([memfs_bin, "--stores", str(server.root), "token", "revoke", "ana"], check=True)
            r = page.request.get(f"{server.url}/web/{store}/")
            assert r.status == 401
            browser.close()
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_two_pages_side_by_side_keep_their_sessions_and_a_stolen_cookie_is_not_enough(memfs_bin, tmp_path):
    """A browser sends a loopback cookie to every port: two `memfs web` on
    one machine, logged in from one browser, stay logged in both; and a
    local program that is sent a page's cookie cannot use it without the
    instance's own path."""
    import urllib.error
    import urllib.request
    need(os.path.exists(CHROMIUM), "Debian's chromium")
    pages = []
    for name in ("one", "two"):
        data = tmp_path / name
        data.mkdir()
        Agent(memfs_bin, data).close()
        web = subprocess.Popen([memfs_bin, "--data", str(data), "web"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        url = web.stdout.readline().strip()
        pages.append((web, url, url.split("/login")[0]))
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            context = browser.new_context()
            tab = context.new_page()
            for _, url, base in pages:
                tab.goto(url)
                assert tab.url == base + "/"
            for _, _, base in pages:  # both still logged in
                tab.goto(base + "/review")
                assert "log in" not in tab.inner_text("body"), base
            cookies = context.cookies()
            assert len({c["name"] for c in cookies}) == 2, cookies
            browser.close()
        # The first page's cookie, replayed by another program: refused
        # outside the instance's path, and the path alone is no session.
        one = next(c for c in cookies if pages[0][2].split("/p/")[1] in c["path"])
        port_root = pages[0][2].split("/p/")[0]
        for target, headers in ((port_root + "/review", {"Cookie": f"{one['name']}={one['value']}"}),
                                (pages[0][2] + "/review", {})):
            try:
                body = urllib.request.urlopen(urllib.request.Request(target, headers=headers), timeout=10).read()
                raise AssertionError(f"served {target}: {body[:200]!r}")
            except urllib.error.HTTPError as e:
                assert e.code in (401, 404), (target, e.code)
    finally:
        for web, _, _ in pages:
            web.terminate()
            assert web.wait(timeout=30) == 0


def test_the_http_servers_login_is_styled_bounded_and_goes_straight_to_the_one_store(memfs_bin, tmp_path):
    """The `serve --http` page's login: styled like the page, with its icon;
    an admin token in a root of one store goes straight to it; behind a TLS
    proxy (X-Forwarded-Proto: https) the cookie is Secure; one token's logins
    are rate-limited and its sessions bounded; the page fits a 390 px
    screen."""
    need(os.path.exists(CHROMIUM), "Debian's chromium")
    import urllib.error
    import urllib.parse
    import urllib.request
    import anthropic
    from http_server import Server

    server = Server(memfs_bin, tmp_path / "stores")
    try:
        token = server.token("--admin", "--name", "ops")
        ms = anthropic.Anthropic(api_key=token, base_url=server.url, max_retries=0).beta.memory_stores
        store = ms.create(name="only").id
        ms.memories.create(store, path="/a-rather-long-name-for-a-memory-file-that-needs-room.md", content="x\n")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 390, "height": 800})
            page.goto(server.url + "/web/")
            assert page.evaluate("getComputedStyle(document.querySelector('header')).display") == "flex"
            assert page.request.get(server.url + "/web/static/favicon.svg").ok
            page.fill("input[name=token]", token)
            page.click("button[type=submit]")
            assert page.url == f"{server.url}/web/{store}/", "straight to the root's one store"
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the page is {width} px wide on a 390 px screen"
            shot(page, "http-390px")
            browser.close()

        def login(headers=None):
            data = urllib.parse.urlencode({"token": token}).encode()
            req = urllib.request.Request(server.url + "/web/login", data=data, headers=headers or {})
            opener = urllib.request.build_opener(NoRedirect)
            try:
                return opener.open(req, timeout=10)
            except urllib.error.HTTPError as e:
                return e

        r = login({"X-Forwarded-Proto": "https"})
        assert r.status == 303 and "; Secure" in r.headers["set-cookie"], r.headers
        r = login()
        assert r.status == 303 and "Secure" not in r.headers["set-cookie"], r.headers
        # 30 a minute: the browser's and the two above, then 27 more.
        statuses = [login().status for _ in range(40)]
        assert statuses.count(303) == 27 and statuses[-1] == 429, statuses
    finally:
        assert server.stop() == 0, "".join(server.log)


class NoRedirect(__import__("urllib.request").request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_the_review_queue_is_by_session_newest_first_and_paged(memfs_bin, tmp_path):
    """Twelve agent sessions each change a file: the queue shows the ten
    newest sessions first, the rest on the next page; "Keep everything shown"
    keeps those ten; "Undo this session" takes one back whole."""
    need(os.path.exists(CHROMIUM), "Debian's chromium")
    data = tmp_path / "data"
    for i in range(12):
        for text in ("one\n", "two\n"):
            r = subprocess.run([memfs_bin, "--data", str(data), "--as", f"s{i:02}", "exec",
                                json.dumps({"command": "create", "path": f"/memories/f{i:02}.md",
                                            "file_text": text})] if text == "one\n" else
                               [memfs_bin, "--data", str(data), "--as", f"s{i:02}", "exec",
                                json.dumps({"command": "str_replace", "path": f"/memories/f{i:02}.md",
                                            "old_str": "one", "new_str": "two"})],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r
    web = subprocess.Popen([memfs_bin, "--data", str(data), "web"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    url = web.stdout.readline().strip()
    base = url.split("/login")[0]
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(url)
            page.goto(base + "/review")
            assert "24 changes to 12 files by 12 sessions" in page.inner_text("main")
            heads = page.locator("section.session h2").all_inner_texts()
            assert len(heads) == 10 and "(s11)" in heads[0] and "(s02)" in heads[-1], heads
            assert page.locator("section.change", has_text="f11.md").inner_text().count("2 changes") == 1
            page.click("text=older")
            heads = page.locator("section.session h2").all_inner_texts()
            assert len(heads) == 2 and "(s01)" in heads[0] and "(s00)" in heads[1], heads
            page.goto(base + "/review")
            page.locator("button.keep", has_text="Keep everything shown").click()
            page.wait_for_selector(".said")
            assert "kept 20 changes" in page.inner_text(".said")
            expect(page.locator("#review-count")).to_have_text("4", timeout=20000)
            page.goto(base + "/review")
            page.locator("section.session", has_text="(s01)").locator("button.undo", has_text="Undo this session").click()
            page.wait_for_selector(".said")
            assert not (data / "memories" / "f01.md").exists() or subprocess.run(
                [memfs_bin, "--data", str(data), "exec", '{"command":"view","path":"/memories/f01.md"}'],
                capture_output=True, text=True).returncode == 1
            expect(page.locator("#review-count")).to_have_text("2", timeout=20000)
            browser.close()
    finally:
        web.terminate()
        assert web.wait(timeout=30) == 0


def test_the_search_box_finds_marks_and_opens_the_line_and_follows_changes(setup):
    s = setup
    s["agent"].call(command="create", path="/memories/notes/http.md",
                    file_text="# Replies\nWe call parse_http_reply on <b>each</b> answer.\nthe end\n")
    (s["mnt"] / "people" / "bo.md").write_text("Bo's HTTP reply notes.\n")
    (s["mnt"] / ".hidden.md").write_text("a hidden http_reply\n")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(s["url"])
        page.fill("form.search input[name=q]", "http_reply")
        page.press("form.search input[name=q]", "Enter")
        page.wait_for_url(re.compile(r".*/search\?q=http_reply$"))
        hits = page.locator("div.hit h2").all_inner_texts()
        assert sorted(hits) == ["notes/http.md", "people/bo.md"], hits  # the hidden file is left out
        marks = page.locator("div.hit mark").all_inner_texts()
        assert "http_reply" in marks and "HTTP reply" in marks, marks
        # The file's own markup is text, not markup.
        assert "<b>each</b>" in page.inner_text("main")
        assert page.locator("main b").count() == 0
        shot(page, "search")
        # A line number opens the file at that line.
        page.click("div.hit:has-text('notes/http.md') td.n a")
        page.wait_for_url(re.compile(r".*/file\?path=.*#L2$"))
        assert page.locator("tr#L2").inner_text().endswith("We call parse_http_reply on <b>each</b> answer.")
        # The results follow the memory live, without a reload.
        page.goto(s["base"] + "/search?q=ocelot")
        assert "Nothing found" in page.inner_text("main")
        page.evaluate("window.__same_page = 1")
        s["agent"].call(command="create", path="/memories/zoo.md", file_text="an ocelot\n")
        page.wait_for_selector("div.hit:has-text('zoo.md')", timeout=20000)
        assert page.evaluate("window.__same_page") == 1
        # A query it cannot run says why.
        page.goto(s["base"] + "/search?q=%22open")
        assert "not closed" in page.inner_text("main .error")
        # A narrow screen keeps the box usable.
        page.set_viewport_size({"width": 390, "height": 800})
        page.goto(s["base"] + "/search?q=reply")
        box = page.locator("form.search input").bounding_box()
        assert box["width"] > 200, box
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert errors == [], errors
        browser.close()


def test_no_answer_outside_the_pages_path_tells_its_secret_path(memfs_bin, tmp_path):
    """The page's links live under /p/KEY/, which no other local program
    may learn: a request anywhere else (the root, a static file, a made-up
    path, with or without a cookie) gets a plain 404 that names no link."""
    import urllib.error
    import urllib.request
    data = tmp_path / "memory"
    data.mkdir()
    Agent(memfs_bin, data).close()
    web = subprocess.Popen([memfs_bin, "--data", str(data), "web"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        url = web.stdout.readline().strip()
        base = url.split("/login")[0]
        root, key = base.split("/p/")
        for path in ("/", "/x", "/favicon.ico", "/static/app.css", "/review", "/p/", "/p/0000/"):
            try:
                urllib.request.urlopen(root + path, timeout=10)
                raise AssertionError(f"{path} was served")
            except urllib.error.HTTPError as e:
                body = e.read().decode()
                assert e.code == 404, (path, e.code)
                assert key not in body and "href" not in body, (path, body[:300])
    finally:
        web.terminate()
        assert web.wait(timeout=30) == 0
